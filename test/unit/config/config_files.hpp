#pragma once

/// @file config_files.hpp
/// A private directory for the config tests' files, removed afterwards.

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <boost/test/unit_test.hpp>

#include "config/config_loader.hpp"
#include "support/build_paths.hpp"

namespace castellan::test {

struct config_dir {
  std::string path;

  config_dir() {
    char tmpl[] = "/tmp/castellan-config-XXXXXX";
    BOOST_REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~config_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }

  /// Writes `text` to `name` in the directory; its full path.
  std::string write(const std::string& name, const std::string& text, mode_t mode = 0644) const {
    const std::string file = path + "/" + name;
    std::ofstream(file, std::ios::binary) << text;
    ::chmod(file.c_str(), mode);
    return file;
  }

  /// Loads `text` as the file castellan.toml of this directory, with the
  /// source tree's policies unless the text names a policy directory.
  config::config_load load(const std::string& text) const {
    return config::load_serve_config(write("castellan.toml", text));
  }
};

/// The source tree's policies, as a `[policies]` table.
inline std::string source_policies() {
  return "[policies]\ndir = \"" + source_dir() + "/policies\"\n";
}

/// Every error's describe(), one per line (for messages on failure).
inline std::string all_errors(const config::config_load& l) {
  std::string out;
  for (const auto& e : l.errors)
    out += e.describe() + "\n";
  return out;
}

} // namespace castellan::test
