#include "platform/linux/landlock.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "ipc/unique_fd.hpp"

// The system headers may predate the ABI this code speaks (the 6.1 UAPI
// headers stop at ABI 3): the structures and constants are spelled out here.
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

namespace castellan::platform {

namespace {

constexpr uint32_t create_ruleset_version = 1u << 0;
constexpr int rule_path_beneath = 1;
constexpr int rule_net_port = 2;

struct ruleset_attr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net; ///< ABI 4
  uint64_t scoped;             ///< ABI 6
};

struct __attribute__((packed)) path_beneath_attr {
  uint64_t allowed_access;
  int32_t parent_fd;
};

struct net_port_attr {
  uint64_t allowed_access;
  uint64_t port;
};

struct named_bit {
  const char* name;
  uint64_t bit;
};

constexpr named_bit fs_names[] = {
  {"execute", landlock_fs::execute},       {"write_file", landlock_fs::write_file},
  {"read_file", landlock_fs::read_file},   {"read_dir", landlock_fs::read_dir},
  {"remove_dir", landlock_fs::remove_dir}, {"remove_file", landlock_fs::remove_file},
  {"make_char", landlock_fs::make_char},   {"make_dir", landlock_fs::make_dir},
  {"make_reg", landlock_fs::make_reg},     {"make_sock", landlock_fs::make_sock},
  {"make_fifo", landlock_fs::make_fifo},   {"make_block", landlock_fs::make_block},
  {"make_sym", landlock_fs::make_sym},     {"refer", landlock_fs::refer},
  {"truncate", landlock_fs::truncate},     {"ioctl_dev", landlock_fs::ioctl_dev},
};
constexpr named_bit net_names[] = {{"bind_tcp", landlock_net::bind_tcp},
                                   {"connect_tcp", landlock_net::connect_tcp}};
constexpr named_bit scope_names[] = {
  {"abstract_unix_socket", landlock_scope::abstract_unix_socket},
  {"signal", landlock_scope::signal}};

template <std::size_t N>
std::vector<std::string> names_of(const named_bit (&table)[N], uint64_t mask) {
  std::vector<std::string> out;
  for (const auto& e : table)
    if (mask & e.bit)
      out.emplace_back(e.name);
  return out;
}

template <std::size_t N>
std::optional<uint64_t> bit_of(const named_bit (&table)[N], const std::string& name) noexcept {
  for (const auto& e : table)
    if (name == e.name)
      return e.bit;
  return std::nullopt;
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v)
    out += (out.empty() ? "" : ",") + s;
  return out;
}

} // namespace

int landlock_abi() noexcept {
  const long abi =
    ::syscall(SYS_landlock_create_ruleset, nullptr, 0, create_ruleset_version);
  return abi < 0 ? 0 : static_cast<int>(abi);
}

uint64_t landlock_fs_rights_of_abi(int abi) noexcept {
  if (abi < 1)
    return 0;
  uint64_t r = (1ull << 13) - 1;
  if (abi >= 2)
    r |= landlock_fs::refer;
  if (abi >= 3)
    r |= landlock_fs::truncate;
  if (abi >= 5)
    r |= landlock_fs::ioctl_dev;
  return r;
}

uint64_t landlock_net_rights_of_abi(int abi) noexcept {
  return abi >= 4 ? landlock_net::all : 0;
}

uint64_t landlock_scopes_of_abi(int abi) noexcept {
  return abi >= 6 ? landlock_scope::all : 0;
}

outcome<landlock_report> apply_landlock(const landlock_spec& spec) {
  landlock_report report;
  if (!spec.enabled)
    return report;
  report.abi = landlock_abi();
  if (report.abi == 0) {
    if (spec.best_effort)
      return report;
    return errno_failure("landlock: landlock_create_ruleset(VERSION) (the kernel has no "
                         "Landlock, or it is not in the active LSMs)");
  }
  const uint64_t fs_ok = landlock_fs_rights_of_abi(report.abi);
  const uint64_t net_ok = landlock_net_rights_of_abi(report.abi);
  const uint64_t scope_ok = landlock_scopes_of_abi(report.abi);
  if ((spec.handled_fs & ~landlock_fs::all) || (spec.handled_net & ~landlock_net::all) ||
      (spec.scoped & ~landlock_scope::all))
    return logic_failure("landlock: the spec names rights this build does not know");
  report.dropped_fs = spec.handled_fs & ~fs_ok;
  report.dropped_net = spec.handled_net & ~net_ok;
  report.dropped_scoped = spec.scoped & ~scope_ok;
  if (!spec.best_effort && (report.dropped_fs || report.dropped_net || report.dropped_scoped)) {
    std::vector<std::string> missing = landlock_fs_names(report.dropped_fs);
    for (auto& n : landlock_net_names(report.dropped_net))
      missing.push_back(n);
    for (auto& n : landlock_scope_names(report.dropped_scoped))
      missing.push_back("scope " + n);
    return logic_failure("landlock: the kernel's ABI " + std::to_string(report.abi) +
                         " lacks " + joined(missing) + " (best_effort is off)");
  }
  report.handled_fs = spec.handled_fs & fs_ok;
  report.handled_net = spec.handled_net & net_ok;
  report.scoped = spec.scoped & scope_ok;

  ruleset_attr attr{report.handled_fs, report.handled_net, report.scoped};
  const std::size_t attr_size = report.abi >= 6   ? sizeof(ruleset_attr)
                                : report.abi >= 4 ? 2 * sizeof(uint64_t)
                                                  : sizeof(uint64_t);
  unique_fd ruleset(static_cast<int>(
    ::syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0)));
  if (!ruleset)
    return errno_failure("landlock: landlock_create_ruleset");

  for (const auto& rule : spec.paths) {
    unique_fd fd(::open(rule.path.c_str(), O_PATH | O_CLOEXEC));
    if (!fd) {
      if (rule.optional && errno == ENOENT) {
        report.skipped_paths.push_back(rule.path);
        continue;
      }
      return errno_failure("landlock: open(O_PATH) " + rule.path);
    }
    struct stat st;
    if (::fstat(fd.get(), &st) != 0)
      return errno_failure("landlock: fstat " + rule.path);
    uint64_t access = rule.access & report.handled_fs;
    if (!S_ISDIR(st.st_mode))
      access &= landlock_fs::file_rights;
    if (access == 0)
      continue; // nothing this ruleset handles: the rule would change nothing
    path_beneath_attr pb{access, fd.get()};
    if (::syscall(SYS_landlock_add_rule, ruleset.get(), rule_path_beneath, &pb, 0) != 0)
      return errno_failure("landlock: add rule " + rule.path + " (" +
                           joined(landlock_fs_names(access)) + ")");
    ++report.path_rules;
  }
  for (const auto& rule : spec.ports) {
    const uint64_t access = rule.access & report.handled_net;
    if (access == 0)
      continue;
    net_port_attr np{access, rule.port};
    if (::syscall(SYS_landlock_add_rule, ruleset.get(), rule_net_port, &np, 0) != 0)
      return errno_failure("landlock: add rule tcp port " + std::to_string(rule.port));
    ++report.port_rules;
  }
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    return errno_failure("landlock: prctl(PR_SET_NO_NEW_PRIVS)");
  if (::syscall(SYS_landlock_restrict_self, ruleset.get(), 0) != 0)
    return errno_failure("landlock: landlock_restrict_self");
  report.enforced = true;
  return report;
}

std::vector<std::string> landlock_fs_names(uint64_t mask) { return names_of(fs_names, mask); }
std::optional<uint64_t> landlock_fs_right(const std::string& name) noexcept {
  return bit_of(fs_names, name);
}
std::vector<std::string> landlock_net_names(uint64_t mask) { return names_of(net_names, mask); }
std::optional<uint64_t> landlock_net_right(const std::string& name) noexcept {
  return bit_of(net_names, name);
}
std::vector<std::string> landlock_scope_names(uint64_t mask) {
  return names_of(scope_names, mask);
}
std::optional<uint64_t> landlock_scope_bit(const std::string& name) noexcept {
  return bit_of(scope_names, name);
}

} // namespace castellan::platform
