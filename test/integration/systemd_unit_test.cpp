/// @file systemd_unit_test.cpp
/// packaging/systemd/castellan.service as `cmake --install` installs it: its
/// settings are those docs/operations.md gives and the daemon needs, systemd
/// accepts it (`systemd-analyze verify`), and the installed daemon serves an
/// exec under the confinement the unit asks for — emulated without systemd,
/// whose PID 1 a test cannot rely on: a private mount namespace with every
/// mount but /proc, /sys and /dev read-only (ProtectSystem=strict), tmpfs
/// over /tmp (PrivateTmp) and mode-000 tmpfs over /home and /root
/// (ProtectHome), a writable /run/castellan (RuntimeDirectory), no_new_privs
/// (NoNewPrivileges), and SIGTERM to the daemon alone (KillMode=mixed).

#include <boost/test/unit_test.hpp>

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "support/build_paths.hpp"
#include "support/run_process.hpp"

using castellan::test::run_process;

namespace {

/// A 0700 directory under /var/tmp with an install of this build tree.
struct installed_tree {
  std::string home;
  std::string prefix;

  installed_tree() {
    char pattern[] = "/var/tmp/castellan-unit-XXXXXX";
    BOOST_REQUIRE(::mkdtemp(pattern) != nullptr);
    home = pattern;
    BOOST_REQUIRE(::chmod(home.c_str(), 0700) == 0);
    prefix = home + "/prefix";
    auto r = run_process({CASTELLAN_CMAKE_COMMAND, "--install", castellan::test::build_dir(),
                          "--prefix", prefix},
                         {}, 120);
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, "cmake --install: " << r.out << r.err);
  }
  ~installed_tree() {
    std::error_code ec;
    std::filesystem::remove_all(home, ec);
  }
  std::string unit() const { return prefix + "/lib/systemd/system/castellan.service"; }
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  BOOST_REQUIRE_MESSAGE(in, "cannot read " << path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// "Section.Key" → values, in file order (a unit file may repeat keys).
using unit_keys = std::map<std::string, std::vector<std::string>>;

unit_keys parse_unit(const std::string& text) {
  unit_keys keys;
  std::istringstream in(text);
  std::string line;
  std::string section;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line[0] == ';')
      continue;
    BOOST_REQUIRE_MESSAGE(line.back() != '\\', "a continued line: " << line);
    if (line.front() == '[') {
      BOOST_REQUIRE_MESSAGE(line.back() == ']', "a bad section header: " << line);
      section = line.substr(1, line.size() - 2);
      continue;
    }
    const auto eq = line.find('=');
    BOOST_REQUIRE_MESSAGE(eq != std::string::npos && !section.empty(), "not a setting: " << line);
    keys[section + "." + line.substr(0, eq)].push_back(line.substr(eq + 1));
  }
  return keys;
}

std::string one(const unit_keys& keys, const std::string& key) {
  auto it = keys.find(key);
  BOOST_REQUIRE_MESSAGE(it != keys.end(), "the unit has no " << key);
  BOOST_REQUIRE_MESSAGE(it->second.size() == 1u, key << " is set more than once");
  return it->second.front();
}

/// The default drain grace of castellan.toml, in seconds ("# drain_grace_ms = N").
unsigned default_drain_grace_s() {
  const std::string text = read_file(castellan::test::source_dir() + "/config/castellan.toml");
  const std::string key = "# drain_grace_ms = ";
  const auto at = text.find(key);
  BOOST_REQUIRE(at != std::string::npos);
  return static_cast<unsigned>(std::stoul(text.substr(at + key.size()))) / 1000u;
}

/// The confinement the unit asks for, then `castellan serve`, one exec
/// through the default socket, SIGTERM to the daemon; with `tunables_ro`,
/// /proc/sys read-only as ProtectKernelTunables makes it; with `kmsg_covered`,
/// /proc/kmsg covered as ProtectKernelLogs covers it.
const char* const emulation = R"sh(set -e
awk '{print $5}' /proc/self/mountinfo | grep -Ev '^/(proc|sys|dev)(/|$)' | while read -r m; do
  mount -o remount,bind,ro "$m"
done
if [ "$3" = tunables_ro ]; then mount --bind /proc/sys /proc/sys; mount -o remount,bind,ro /proc/sys; fi
if [ "$3" = kmsg_covered ]; then mount --bind /dev/null /proc/kmsg; fi
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t tmpfs -o mode=000 tmpfs /home
mount -t tmpfs -o mode=000 tmpfs /root
mount -t tmpfs -o mode=755 tmpfs /run
mkdir -m 0755 /run/castellan
if touch /usr/.castellan-rw-check 2>/dev/null; then echo "/usr is writable"; exit 3; fi
setpriv --no-new-privs "$1/bin/castellan" serve --config "$2" > /run/serve.out 2>&1 &
pid=$!
i=0
while [ ! -S /run/castellan/castellan.sock ]; do
  i=$((i+1)); [ $i -lt 3000 ] || { cat /run/serve.out; exit 4; }; sleep 0.01
done
curl -s --max-time 60 --unix-socket /run/castellan/castellan.sock -H 'Content-Type: application/json' \
  -d '{"code": "print(6*7)"}' http://localhost/v1/exec | grep -o '"stdout":"[^"]*"\|"detail":"[^"]*"'
kill -TERM $pid
if wait $pid; then echo "serve exited 0"; else echo "serve exited $?"; fi
cat /run/serve.out
)sh";

} // namespace

BOOST_AUTO_TEST_SUITE(systemd_unit)

BOOST_AUTO_TEST_CASE(the_installed_unit_runs_the_installed_daemon_with_the_settings_it_needs) {
  installed_tree t;
  const auto keys = parse_unit(read_file(t.unit()));
  BOOST_TEST(one(keys, "Service.ExecStart") ==
             t.prefix + "/bin/castellan serve --config /etc/castellan/castellan.toml");
  // No sd_notify in the daemon.
  BOOST_TEST(one(keys, "Service.Type") == "exec");
  // The drain: SIGTERM to the daemon only, and time for the grace plus the
  // 10 s a cancel may take to be answered.
  BOOST_TEST(one(keys, "Service.KillSignal") == "SIGTERM");
  BOOST_TEST(one(keys, "Service.KillMode") == "mixed");
  const std::string stop = one(keys, "Service.TimeoutStopSec");
  BOOST_REQUIRE(stop.size() > 1u && stop.back() == 's');
  BOOST_TEST(std::stoul(stop) > default_drain_grace_s() + 10u, stop);
  // systemctl reload: SIGHUP to the daemon, which reloads pools and tokens.
  BOOST_TEST(one(keys, "Service.ExecReload") == "/bin/kill -HUP $MAINPID");
  BOOST_TEST(one(keys, "Service.Delegate") == "yes");
  BOOST_TEST(one(keys, "Service.NoNewPrivileges") == "yes");
  BOOST_TEST(one(keys, "Service.ProtectSystem") == "strict");
  // The default socket's directory and the default state_dir (as root).
  BOOST_TEST(one(keys, "Service.RuntimeDirectory") == "castellan");
  BOOST_TEST(one(keys, "Service.StateDirectory") == "castellan");
  BOOST_TEST(one(keys, "Service.StateDirectoryMode") == "0700");
  BOOST_TEST(one(keys, "Service.PrivateTmp") == "yes");
  BOOST_TEST(one(keys, "Service.ProtectHome") == "yes");
  // Settings that would break the workers or the daemon (docs/operations.md).
  for (const char* k :
       {"User", "DynamicUser", "ProtectKernelTunables", "ProtectKernelLogs", "ProtectProc",
        "ProcSubset", "PrivateDevices", "ProtectControlGroups", "SystemCallFilter",
        "RestrictNamespaces", "MemoryDenyWriteExecute", "LockPersonality", "PrivateUsers",
        "CapabilityBoundingSet"})
    BOOST_TEST(keys.count(std::string("Service.") + k) == 0u, k << " is set");
  // The default config is installed where the operations guide copies it from.
  BOOST_TEST(std::filesystem::exists(t.prefix + "/share/castellan/castellan.toml"));
}

BOOST_AUTO_TEST_CASE(systemd_analyze_verifies_the_unit) {
  installed_tree t;
  auto r = run_process({"/usr/bin/systemd-analyze", "verify", t.unit()}, {}, 120);
  BOOST_TEST(r.exit_code == 0, r.out << r.err);
  BOOST_TEST(r.out + r.err == "", "systemd-analyze verify has remarks: " << r.out << r.err);
}

BOOST_AUTO_TEST_CASE(the_daemon_serves_under_the_units_confinement_and_drains_on_sigterm) {
  installed_tree t;
  const std::string config = t.home + "/castellan.toml";
  // The unit's state directory is /var/lib/castellan; here a directory of
  // the emulation's writable /run stands for it.
  std::ofstream(config) << "state_dir = \"/run/castellan-state\"\n"
                        << "[[pools]]\nname = \"default\"\nsize = 1\n";
  std::ofstream(t.home + "/emulate.sh") << emulation;
  auto r = run_process({"/usr/bin/unshare", "-m", "--propagation", "private", "/bin/sh",
                        t.home + "/emulate.sh", t.prefix, config, "strict"},
                       {}, 120);
  BOOST_TEST(r.exit_code == 0, r.out << r.err);
  BOOST_TEST(r.out.find("\"stdout\":\"42\\n\"") != std::string::npos, r.out << r.err);
  BOOST_TEST(r.out.find("serve exited 0\n") != std::string::npos, r.out << r.err);
  BOOST_TEST(r.out.find("castellan: listening on unix:/run/castellan/castellan.sock\n") !=
                 std::string::npos,
             r.out);
  BOOST_TEST(r.out.find("castellan: stopped\n") != std::string::npos, r.out);

  // Why ProtectKernelTunables is left out: with /proc/sys read-only no
  // worker starts (each sets vm.memfd_noexec in its pid namespace).
  auto tunables = run_process({"/usr/bin/unshare", "-m", "--propagation", "private", "/bin/sh",
                               t.home + "/emulate.sh", t.prefix, config, "tunables_ro"},
                              {}, 120);
  BOOST_TEST(tunables.exit_code == 0, tunables.out << tunables.err);
  BOOST_TEST(tunables.out.find("\"stdout\":\"42\\n\"") == std::string::npos, tunables.out);
  BOOST_TEST(tunables.out.find("vm.memfd_noexec") != std::string::npos, tunables.out);

  // Why nothing may cover a part of /proc (ProtectKernelLogs, ProtectProc…):
  // a user namespace may mount a fresh /proc only where the host's is not
  // partly covered, and no worker's root can be built.
  auto kmsg = run_process({"/usr/bin/unshare", "-m", "--propagation", "private", "/bin/sh",
                           t.home + "/emulate.sh", t.prefix, config, "kmsg_covered"},
                          {}, 120);
  BOOST_TEST(kmsg.exit_code == 0, kmsg.out << kmsg.err);
  BOOST_TEST(kmsg.out.find("\"stdout\":\"42\\n\"") == std::string::npos, kmsg.out);
  BOOST_TEST(kmsg.out.find("the root file system could not be built") != std::string::npos,
             kmsg.out);
}

BOOST_AUTO_TEST_SUITE_END()
