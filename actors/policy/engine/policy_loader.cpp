#include "actors/policy/engine/policy_loader.hpp"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "actors/policy/engine/json_reader.hpp"
#include "actors/policy/engine/merge.hpp"
#include "actors/policy/engine/policy_parser.hpp"

namespace castellan::policy {

namespace {

policy_error file_error(const std::string& path, std::string message) {
  return policy_error{path, "", "", std::move(message)};
}

// Reads a regular file of at most max_policy_bytes.
validated<std::string> read_text(const std::string& path) {
  // The type is checked before the file is opened for reading: opening a
  // device (a link to /dev/watchdog named like a policy) has effects of its
  // own. O_PATH opens nothing; the read goes through that very inode.
  const int path_fd = ::open(path.c_str(), O_PATH | O_CLOEXEC);
  if (path_fd < 0)
    return file_error(path, std::string{"cannot open: "} + std::strerror(errno));
  struct stat st {};
  if (::fstat(path_fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(path_fd);
    return file_error(path, "not a regular file");
  }
  const std::string by_fd = "/proc/self/fd/" + std::to_string(path_fd);
  // O_NONBLOCK: should the inode not be what fstat saw, never hang on it.
  const int fd = ::open(by_fd.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  ::close(path_fd);
  if (fd < 0)
    return file_error(path, std::string{"cannot open: "} + std::strerror(errno));
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR)
        continue;
      const int err = errno;
      ::close(fd);
      return file_error(path, std::string{"cannot read: "} + std::strerror(err));
    }
    if (n == 0)
      break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > max_policy_bytes) {
      ::close(fd);
      return file_error(path, "larger than " + std::to_string(max_policy_bytes) + " bytes");
    }
  }
  ::close(fd);
  return text;
}

// A stable identity for cycle detection: the canonical path when the file
// exists, the path as written otherwise.
std::string identity_of(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) != nullptr)
    return buf;
  return path;
}

std::string join_path(const std::string& dir, const std::string& rel) {
  if (!rel.empty() && rel.front() == '/')
    return rel;
  if (dir.empty() || dir == ".")
    return rel;
  return dir.back() == '/' ? dir + rel : dir + "/" + rel;
}

class layer_resolver {
public:
  explicit layer_resolver(const std::string& policy_dir) : policy_dir_(policy_dir) {}

  std::vector<policy_document> layers;
  std::vector<policy_error> errors;
  std::vector<std::string> files; ///< every file read, in the order read

  // Adds the layers of an already-read document (its own file last).
  void visit_document(const policy_document& doc, const std::string& base_dir,
                      const std::string& identity) {
    stack_.push_back(identity);
    stack_display_.push_back(doc.source);
    for (size_t i = 0; i < doc.extends.size() && errors.empty(); ++i) {
      const std::string& entry = doc.extends[i];
      const std::string target = is_extends_path(entry) ? join_path(base_dir, entry)
                                                        : join_path(policy_dir_, entry + ".json");
      visit_file(target, doc.source, "/extends/" + std::to_string(i), entry);
    }
    stack_.pop_back();
    stack_display_.pop_back();
    done_.insert(identity);
    if (errors.empty())
      layers.push_back(doc);
  }

private:
  void visit_file(const std::string& path, const std::string& from_file,
                  const std::string& from_pointer, const std::string& entry) {
    const std::string id = identity_of(path);
    for (size_t i = 0; i < stack_.size(); ++i) {
      if (stack_[i] != id)
        continue;
      std::string cycle;
      for (size_t j = i; j < stack_display_.size(); ++j)
        cycle += stack_display_[j] + " -> ";
      cycle += path;
      errors.push_back(policy_error{from_file, from_pointer, "\"" + entry + "\"",
                                    "extends cycle: " + cycle + " (extends)"});
      return;
    }
    if (done_.count(id) != 0)
      return;
    if (done_.size() + stack_.size() >= max_extends_layers) {
      errors.push_back(policy_error{from_file, from_pointer, "\"" + entry + "\"",
                                    "more than " + std::to_string(max_extends_layers) +
                                        " policies extended (extends)"});
      return;
    }
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      errors.push_back(policy_error{from_file, from_pointer, "\"" + entry + "\"",
                                    "no such policy: " + path + " (extends)"});
      return;
    }
    auto doc = read_policy_file(path);
    files.push_back(path);
    if (!doc) {
      errors.insert(errors.end(), doc.errors().begin(), doc.errors().end());
      return;
    }
    visit_document(*doc, parent_directory(path), id);
  }

  std::string policy_dir_;
  std::vector<std::string> stack_;
  std::vector<std::string> stack_display_;
  std::set<std::string> done_;
};

} // namespace

std::string parent_directory(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  if (slash == 0)
    return "/";
  return path.substr(0, slash);
}

validated<policy_document> read_policy_file(const std::string& path) {
  auto text = read_text(path);
  if (!text)
    return text.errors();
  return parse_policy(*text, path);
}

validated<std::vector<policy_document>> load_policy_layers(const std::string& path,
                                                           const std::string& policy_dir) {
  auto doc = read_policy_file(path);
  if (!doc)
    return doc.errors();
  layer_resolver r{policy_dir};
  r.visit_document(*doc, parent_directory(path), identity_of(path));
  if (!r.errors.empty())
    return std::move(r.errors);
  return std::move(r.layers);
}

validated<policy_document> load_policy(const std::string& path, const std::string& policy_dir) {
  auto layers = load_policy_layers(path, policy_dir);
  if (!layers)
    return layers.errors();
  policy_document out = merge_policies(*layers);
  out.source = path;
  return out;
}

validated<policy_document> resolve_extends(const policy_document& doc, const std::string& base_dir,
                                           const std::string& policy_dir,
                                           std::vector<std::string>* files_read) {
  if (doc.extends.empty())
    return doc;
  layer_resolver r{policy_dir};
  r.visit_document(doc, base_dir,
                   doc.source.empty() ? std::string{"<memory>"} : identity_of(doc.source));
  if (files_read != nullptr)
    *files_read = r.files;
  if (!r.errors.empty())
    return std::move(r.errors);
  policy_document out = merge_policies(r.layers);
  out.source = doc.source;
  return out;
}

} // namespace castellan::policy
