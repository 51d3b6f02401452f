/// @file package_etc.cpp
/// See package_etc.hpp.

#include "platform/linux/package_etc.hpp"

#include <dirent.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>

namespace castellan::platform {

namespace {

/// Files package scripts generate instead of shipping them, which the
/// runtime reads: the loader's cache (ldconfig), the time zone (tzdata), the
/// mailcap (update-mime), Python's Debian config (python3-minimal), and the
/// classic lookup tables.
const char* const generated_by_packages[] = {
  "ld.so.cache", "localtime", "timezone", "mailcap", "python3", "networks",
  "shells",      "inputrc",   "ca-certificates.conf"};

/// What the sandbox generates itself (root_builder.cpp): never bound.
const char* const generated_by_sandbox[] = {"passwd", "group", "hosts", "nsswitch.conf"};

/// The hand-picked list used where there is no dpkg database.
const char* const fallback_candidates[] = {
  "ld.so.cache", "localtime", "ssl", "ca-certificates", "alternatives", "mime.types",
  "protocols",   "services",  "gai.conf"};

bool matches_deny(const std::string& rel) {
  for (const auto& p : etc_deny_patterns())
    if (::fnmatch(p.c_str(), rel.c_str(), FNM_PATHNAME | FNM_PERIOD) == 0)
      return true;
  return false;
}

/// Why a (non-symlink) entry may not be shown to everyone; empty when it may.
std::string unreadable_reason(const struct stat& st) {
  if (S_ISDIR(st.st_mode)) {
    if ((st.st_mode & (S_IROTH | S_IXOTH)) != (S_IROTH | S_IXOTH))
      return "directory not readable by others";
    return {};
  }
  if (S_ISREG(st.st_mode)) {
    if ((st.st_mode & S_IROTH) == 0)
      return "not readable by others";
    return {};
  }
  return "not a regular file, directory or symlink";
}

/// The first component below /etc of every path in `file` that lies there.
std::size_t add_candidates_from(const std::string& file, std::set<std::string>& out) {
  std::ifstream in(file);
  if (!in)
    return 0;
  std::size_t n = 0;
  for (std::string line; std::getline(in, line);) {
    // *.conffiles lines may carry a flag before the path ("remove-on-upgrade
    // /etc/…"), ucf's hashfile a hash before it.
    const auto at = line.find("/etc/");
    if (at == std::string::npos || (at != 0 && line[at - 1] != ' '))
      continue;
    std::string rest = line.substr(at + 5);
    const auto slash = rest.find('/');
    if (slash != std::string::npos)
      rest.resize(slash);
    if (rest.empty() || rest == "." || rest == "..")
      continue;
    out.insert(rest);
    ++n;
  }
  return n;
}

/// Walks the shown directory `rel` (below `etc`), masking what may not be
/// shown; false when the walk exceeded `budget` (then the directory is not
/// shown at all).
bool walk(const std::string& etc, const std::string& rel, dev_t dev,
          std::vector<std::string>& masked, std::size_t& budget) {
  DIR* d = ::opendir((etc + "/" + rel).c_str());
  if (d == nullptr)
    return false;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..")
      names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    if (budget == 0)
      return false;
    --budget;
    const std::string child = rel + "/" + n;
    struct stat st;
    if (::lstat((etc + "/" + child).c_str(), &st) != 0)
      continue; // gone meanwhile: nothing to show
    if (S_ISLNK(st.st_mode))
      continue; // resolved inside the sandbox, to what it shows
    // Another file system mounted inside (a container runtime's secret or
    // config volume) is not a package's: masked whole.
    if (matches_deny(child) || !unreadable_reason(st).empty() || st.st_dev != dev) {
      masked.push_back(child);
      continue;
    }
    if (S_ISDIR(st.st_mode) && !walk(etc, child, dev, masked, budget))
      return false;
  }
  return true;
}

} // namespace

const std::vector<std::string>& etc_deny_patterns() {
  static const std::vector<std::string> patterns{
    // Accounts, their backups and privileges.
    "shadow", "shadow-", "gshadow", "gshadow-", "passwd-", "group-", "subuid", "subuid-",
    "subgid", "subgid-", ".pwd.lock", "sudoers", "sudoers.d", "doas.conf", "security/opasswd",
    // Host identity and keys.
    "machine-id", "hostid", "ssh/ssh_host_*", "ssl/private", "pki", "krb5.keytab",
    "letsencrypt", "wireguard", "ipsec.secrets", "ipsec.d/private", "openvpn",
    // Credential stores and files known to hold passwords.
    "credstore", "credstore.encrypted", "NetworkManager/system-connections", "ppp/*-secrets",
    "libvirt/secrets", "docker/key.json", "cups/ssl", "mysql/debian.cnf", "ldap.secret",
    "pam_ldap.secret", "libnss-ldap.secret", "exim4/passwd.client", "postfix/sasl_passwd*",
    "apt/auth.conf", "apt/auth.conf.d", "msmtprc", "ssmtp", "samba/smbpasswd",
    // castellan's own configuration (API tokens, TLS keys).
    "castellan"};
  return patterns;
}

etc_view derive_etc_view(const etc_view_options& options) {
  etc_view view;
  view.etc_dir = options.etc_dir;
  std::set<std::string> candidates;
  std::size_t packages = 0;
  if (DIR* d = ::opendir(options.dpkg_info_dir.c_str())) {
    std::vector<std::string> files;
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      auto ends = [&](const char* suffix) {
        const std::string s = suffix;
        return n.size() > s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0;
      };
      if (ends(".list"))
        ++packages;
      if (ends(".list") || ends(".conffiles"))
        files.push_back(options.dpkg_info_dir + "/" + n);
    }
    ::closedir(d);
    for (const auto& f : files)
      add_candidates_from(f, candidates);
  }
  if (packages == 0) {
    for (const char* c : fallback_candidates)
      candidates.insert(c);
    view.source = "built-in list (no dpkg database at " + options.dpkg_info_dir + ")";
  } else {
    const std::size_t ucf = add_candidates_from(options.ucf_hashfile, candidates);
    for (const char* c : generated_by_packages)
      candidates.insert(c);
    view.source = "dpkg: " + std::to_string(packages) + " packages, ucf: " +
                  std::to_string(ucf) + " file(s), " +
                  std::to_string(std::size(generated_by_packages)) + " made by package scripts";
  }

  struct stat etc_st;
  const dev_t etc_dev = ::stat(options.etc_dir.c_str(), &etc_st) == 0 ? etc_st.st_dev : 0;
  for (const auto& name : candidates) {
    if (std::find(std::begin(generated_by_sandbox), std::end(generated_by_sandbox), name) !=
        std::end(generated_by_sandbox))
      continue; // generated inside the sandbox
    if (matches_deny(name)) {
      view.withheld.push_back(name + " (deny list)");
      continue;
    }
    const std::string host = options.etc_dir + "/" + name;
    struct stat st;
    if (::lstat(host.c_str(), &st) != 0)
      continue; // owned but not there (removed, or a conffile of a removed package)
    if (S_ISLNK(st.st_mode)) {
      char buf[4096];
      const ssize_t n = ::readlink(host.c_str(), buf, sizeof buf - 1);
      if (n <= 0)
        continue;
      view.entries.push_back(
        {name, etc_entry::kind::symlink, std::string(buf, static_cast<std::size_t>(n))});
      continue;
    }
    if (auto why = unreadable_reason(st); !why.empty()) {
      view.withheld.push_back(name + " (" + why + ")");
      continue;
    }
    if (st.st_dev != etc_dev) {
      view.withheld.push_back(name + " (another file system mounted there)");
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      std::vector<std::string> masked;
      std::size_t budget = options.max_walk;
      if (!walk(options.etc_dir, name, st.st_dev, masked, budget)) {
        view.withheld.push_back(name + " (more than " + std::to_string(options.max_walk) +
                                " entries, or unreadable)");
        continue;
      }
      view.masked.insert(view.masked.end(), masked.begin(), masked.end());
      view.entries.push_back({name, etc_entry::kind::directory, {}});
    } else {
      view.entries.push_back({name, etc_entry::kind::file, {}});
    }
  }
  return view;
}

const etc_view& package_etc_view() {
  static const etc_view view = derive_etc_view();
  return view;
}

} // namespace castellan::platform
