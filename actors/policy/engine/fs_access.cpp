#include "actors/policy/engine/fs_access.hpp"

#include <array>

namespace castellan::policy {

namespace {

// Index = bit position; must follow the order of the enum.
constexpr std::array<std::string_view, fs_perm_count> perm_names = {
    "execute",   "write_file", "read_file", "read_dir",  "remove_dir", "remove_file",
    "make_char", "make_dir",   "make_reg",  "make_sock", "make_fifo",  "make_block",
    "make_sym",  "refer",      "truncate",  "ioctl_dev",
};

} // namespace

std::optional<fs_access> parse_fs_perm(std::string_view name) noexcept {
  for (unsigned bit = 0; bit < fs_perm_count; ++bit)
    if (perm_names[bit] == name)
      return fs_access{1u} << bit;
  if (name == "write_dir")
    return fs_access_write_dir;
  return std::nullopt;
}

std::string_view fs_perm_name(unsigned bit) noexcept {
  return bit < fs_perm_count ? perm_names[bit] : std::string_view{"?"};
}

std::string to_string_access(fs_access mask) {
  std::string out;
  for (unsigned bit = 0; bit < fs_perm_count; ++bit) {
    if ((mask & (fs_access{1u} << bit)) == 0)
      continue;
    if (!out.empty())
      out += ',';
    out += perm_names[bit];
  }
  return out;
}

std::string_view fs_perm_vocabulary() noexcept {
  return "execute, write_file, read_file, read_dir, remove_dir, remove_file, make_char, "
         "make_dir, make_reg, make_sock, make_fifo, make_block, make_sym, refer, truncate, "
         "ioctl_dev, write_dir (= remove_* + make_*)";
}

} // namespace castellan::policy
