// What a default sandbox sees of /etc: derived from a fabricated dpkg
// database and /etc, then from this host's.

#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "platform/linux/package_etc.hpp"
#include "platform/linux/root_builder.hpp"

using namespace castellan::platform;

namespace {

struct fake_host {
  std::string dir;
  fake_host() {
    char tmpl[] = "/tmp/castellan-etc-XXXXXX";
    BOOST_REQUIRE(::mkdtemp(tmpl) != nullptr);
    dir = tmpl;
    mk("etc", 0755);
    mk("info", 0755);
  }
  ~fake_host() { (void)std::system(("rm -rf " + dir).c_str()); }
  void mk(const std::string& rel, mode_t mode) {
    BOOST_REQUIRE_EQUAL(::mkdir((dir + "/" + rel).c_str(), mode), 0);
    BOOST_REQUIRE_EQUAL(::chmod((dir + "/" + rel).c_str(), mode), 0);
  }
  void file(const std::string& rel, mode_t mode, const std::string& text = "x\n") {
    std::ofstream(dir + "/" + rel) << text;
    BOOST_REQUIRE_EQUAL(::chmod((dir + "/" + rel).c_str(), mode), 0);
  }
  etc_view_options options() const {
    etc_view_options o;
    o.etc_dir = dir + "/etc";
    o.dpkg_info_dir = dir + "/info";
    o.ucf_hashfile = dir + "/ucf-hashfile";
    return o;
  }
};

bool has_entry(const etc_view& v, const std::string& name) {
  return std::any_of(v.entries.begin(), v.entries.end(),
                     [&](const etc_entry& e) { return e.name == name; });
}

bool has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

bool withheld(const etc_view& v, const std::string& name) {
  return std::any_of(v.withheld.begin(), v.withheld.end(), [&](const std::string& w) {
    return w.rfind(name + " (", 0) == 0;
  });
}

} // namespace

BOOST_AUTO_TEST_SUITE(package_etc_tests)

BOOST_AUTO_TEST_CASE(packages_entries_are_shown_and_secrets_are_not) {
  fake_host h;
  h.file("info/python3-matplotlib.list", 0644,
         "/.\n/etc\n/etc/matplotlibrc\n/usr/share/matplotlib\n");
  h.file("info/openssl.list", 0644,
         "/etc/ssl\n/etc/ssl/openssl.cnf\n/etc/ssl/private\n/etc/ssl/certs\n");
  h.file("info/openssh-client.list", 0644, "/etc/ssh\n/etc/ssh/ssh_config\n");
  h.file("info/passwd.list", 0644, "/etc/shadow\n/etc/passwd\n/etc/secret.conf\n");
  h.file("info/castellan.list", 0644, "/etc/castellan\n/etc/castellan/castellan.toml\n");
  h.file("info/fifo.list", 0644, "/etc/a-fifo\n");
  h.file("info/gone.list", 0644, "/etc/removed.conf\n");
  h.file("info/tzdata.conffiles", 0644, "remove-on-upgrade /etc/tz.conf\n");
  h.file("ucf-hashfile", 0644, "0123456789abcdef  /etc/ucf-managed.conf\n");

  h.file("etc/matplotlibrc", 0644);
  h.file("etc/tz.conf", 0644);
  h.file("etc/ucf-managed.conf", 0644);
  h.mk("etc/ssl", 0755);
  h.file("etc/ssl/openssl.cnf", 0644);
  h.mk("etc/ssl/certs", 0755);
  h.file("etc/ssl/certs/ca.pem", 0644);
  BOOST_REQUIRE_EQUAL(::symlink("ca.pem", (h.dir + "/etc/ssl/certs/0a1b2c3d.0").c_str()), 0);
  h.mk("etc/ssl/private", 0710);
  h.file("etc/ssl/private/key.pem", 0600);
  h.file("etc/ssl/world-readable-key.pem", 0640);
  h.mk("etc/ssh", 0755);
  h.file("etc/ssh/ssh_config", 0644);
  h.file("etc/ssh/ssh_host_ed25519_key.pub", 0644); // not owned, but in an owned directory
  h.file("etc/shadow", 0640);
  h.file("etc/passwd", 0644);
  h.file("etc/secret.conf", 0600);
  h.mk("etc/castellan", 0755);
  h.file("etc/castellan/castellan.toml", 0644);
  BOOST_REQUIRE_EQUAL(::mkfifo((h.dir + "/etc/a-fifo").c_str(), 0644), 0);
  h.file("etc/admins-own.conf", 0644); // no package's: never shown
  BOOST_REQUIRE_EQUAL(::symlink("/usr/share/zoneinfo/Etc/UTC", (h.dir + "/etc/localtime").c_str()),
                      0);

  const etc_view v = derive_etc_view(h.options());
  BOOST_TEST(v.source.find("dpkg: 7 packages") != std::string::npos, v.source);
  BOOST_TEST(has_entry(v, "matplotlibrc"));
  BOOST_TEST(has_entry(v, "tz.conf"));           // a conffile line with a flag
  BOOST_TEST(has_entry(v, "ucf-managed.conf"));  // ucf's
  BOOST_TEST(has_entry(v, "ssl"));
  BOOST_TEST(has_entry(v, "ssh"));
  auto localtime = std::find_if(v.entries.begin(), v.entries.end(),
                                [](const etc_entry& e) { return e.name == "localtime"; });
  BOOST_REQUIRE(localtime != v.entries.end()); // made by a package script
  BOOST_TEST((localtime->type == etc_entry::kind::symlink));
  BOOST_TEST(localtime->link_target == "/usr/share/zoneinfo/Etc/UTC");

  // Inside shown directories: restricted, deny-listed entries masked, the
  // rest (symlinks too) left visible.
  BOOST_TEST(has(v.masked, "ssl/private"));
  BOOST_TEST(has(v.masked, "ssl/world-readable-key.pem")); // 0640: not readable by others
  BOOST_TEST(has(v.masked, "ssh/ssh_host_ed25519_key.pub"));
  BOOST_TEST(!has(v.masked, "ssl/certs"));
  BOOST_TEST(!has(v.masked, "ssl/certs/0a1b2c3d.0"));
  BOOST_TEST(!has(v.masked, "ssl/private/key.pem")); // its directory is masked whole

  BOOST_TEST(withheld(v, "shadow"));
  BOOST_TEST(withheld(v, "secret.conf"));
  BOOST_TEST(withheld(v, "castellan"));
  BOOST_TEST(withheld(v, "a-fifo"));
  for (const char* hidden : {"shadow", "secret.conf", "castellan", "a-fifo", "admins-own.conf",
                             "passwd", "removed.conf"})
    BOOST_TEST(!has_entry(v, hidden), hidden);
  BOOST_TEST(!withheld(v, "passwd")); // generated in the sandbox, not withheld

  // A directory too large to check is not shown at all.
  etc_view_options small = h.options();
  small.max_walk = 2;
  const etc_view s = derive_etc_view(small);
  BOOST_TEST(!has_entry(s, "ssl"));
  BOOST_TEST(withheld(s, "ssl"));
}

BOOST_AUTO_TEST_CASE(without_a_dpkg_database_the_builtin_list_is_checked_the_same_way) {
  fake_host h;
  h.mk("etc/ssl", 0755);
  h.mk("etc/ssl/private", 0700);
  h.file("etc/services", 0644);
  h.file("etc/protocols", 0600);
  h.file("etc/matplotlibrc", 0644);
  const etc_view v = derive_etc_view(h.options());
  BOOST_TEST(v.source.find("built-in list") != std::string::npos, v.source);
  BOOST_TEST(has_entry(v, "services"));
  BOOST_TEST(has_entry(v, "ssl"));
  BOOST_TEST(has(v.masked, "ssl/private"));
  BOOST_TEST(withheld(v, "protocols"));
  BOOST_TEST(!has_entry(v, "matplotlibrc"));
}

BOOST_AUTO_TEST_CASE(this_hosts_view_shows_no_secret_and_feeds_the_default_root) {
  const etc_view& v = package_etc_view();
  BOOST_TEST_MESSAGE("etc view: " << v.source << ", " << v.entries.size() << " entries, "
                                  << v.masked.size() << " masked, " << v.withheld.size()
                                  << " withheld");
  for (const char* secret : {"shadow", "gshadow", "shadow-", "gshadow-", "sudoers", "sudoers.d",
                             "machine-id", "subuid", "subgid", "passwd", "group"})
    BOOST_TEST(!has_entry(v, secret), secret);
  // Every shown file and directory is readable by any local user, and no
  // path the deny list names is reachable below a shown directory unmasked.
  for (const auto& e : v.entries) {
    if (e.type == etc_entry::kind::symlink)
      continue;
    struct stat st;
    BOOST_REQUIRE(::lstat(("/etc/" + e.name).c_str(), &st) == 0);
    BOOST_TEST((st.st_mode & S_IROTH) != 0u, e.name);
  }
  if (::access("/etc/ssl/private", F_OK) == 0 && has_entry(v, "ssl"))
    BOOST_TEST(has(v.masked, "ssl/private"));
  // The default root binds them read-only and without exec, one summary line.
  const root_spec spec = default_root_spec();
  std::size_t etc_binds = 0;
  for (const auto& b : spec.binds)
    if (b.target.rfind("/etc/", 0) == 0) {
      ++etc_binds;
      BOOST_TEST(!b.writable, b.target);
      BOOST_TEST(!b.exec, b.target);
      BOOST_TEST(!b.listed, b.target);
    }
  BOOST_TEST(spec.etc.entries == v.entries.size());
  BOOST_TEST(spec.etc.source == v.source);
  if (::access("/etc/ssl/private", F_OK) == 0 && has_entry(v, "ssl"))
    BOOST_TEST(has(spec.masked, "/etc/ssl/private"));
  if (::access("/var/lib/dpkg/info/python3-matplotlib.list", F_OK) == 0 ||
      ::access("/var/lib/dpkg/info/python-matplotlib-data.list", F_OK) == 0) {
    BOOST_TEST(has_entry(v, "matplotlibrc"));
  }
  BOOST_TEST(etc_binds > 0u);
}

BOOST_AUTO_TEST_SUITE_END()
