// build_root + pivot_root in a child born in new user, pid, mount, uts, ipc
// and net namespaces (the way castellan-worker runs it as PID 1).

#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "child_process.hpp"
#include "platform/linux/capabilities.hpp"
#include "platform/linux/file_io.hpp"
#include "platform/linux/root_builder.hpp"
#include "sandbox_helpers.hpp"

using namespace castellan;
using namespace castellan::platform;
using castellan::test::expect_errno;
using castellan::test::expect_ok;

namespace {

/// The top-level names a spec puts in the root.
std::set<std::string> expected_top_level(const root_spec& spec, const root_report& report) {
  std::set<std::string> out;
  auto top = [](const std::string& p) { return p.substr(1, p.find('/', 1) - 1); };
  std::set<std::string> skipped;
  for (const auto& s : report.skipped)
    skipped.insert(s.substr(0, s.find(' ')));
  for (const auto& b : spec.binds)
    if (!skipped.count(b.target))
      out.insert(top(b.target));
  for (const auto& t : spec.tmpfs)
    out.insert(top(t.target));
  for (const auto& f : spec.files)
    out.insert(top(f.path));
  for (const auto& s : spec.symlinks)
    out.insert(top(s.path));
  if (spec.proc)
    out.insert("proc");
  if (spec.minimal_dev)
    out.insert("dev");
  // The empty, inaccessible file masks are bind-mounted from.
  if (!spec.masked.empty())
    out.insert(".castellan-masked");
  return out;
}

std::string temp_dir() {
  char tmpl[] = "/tmp/castellan-root-test-XXXXXX";
  const char* d = ::mkdtemp(tmpl);
  return d ? d : "";
}

} // namespace

BOOST_AUTO_TEST_SUITE(root_builder_tests)

BOOST_AUTO_TEST_CASE(default_root_holds_only_what_python_needs) {
  default_root_options options;
  options.hostname = "sbx";
  const root_spec spec = default_root_spec(options);
  auto body = [&]() -> std::string {
    auto report = build_root(spec);
    if (!report)
      return "build_root: " + report.error().describe();
    std::string err;
    const auto expected = expected_top_level(spec, *report);
    const auto actual = castellan::test::list_dir("/");
    if (actual != expected)
      err += "root has [" + castellan::test::join(actual) + "], expected [" +
             castellan::test::join(expected) + "]\n";
    // Read-only system paths and root; writable /tmp and /dev/shm.
    err += expect_errno("create /usr/probe", ::open("/usr/probe", O_CREAT | O_WRONLY, 0644), EROFS);
    err += expect_errno("mkdir /newdir", ::mkdir("/newdir", 0755), EROFS);
    err += expect_errno("write /etc/passwd", ::open("/etc/passwd", O_WRONLY), EROFS);
    const int t = ::open("/tmp/probe", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    err += expect_ok("create /tmp/probe", t);
    if (t >= 0 && ::write(t, "x", 1) != 1)
      err += "write /tmp/probe failed\n";
    if (t >= 0)
      ::close(t);
    const int s = ::open("/dev/shm/probe", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    err += expect_ok("create /dev/shm/probe", s);
    if (s >= 0)
      ::close(s);
    struct stat st;
    if (::stat("/tmp", &st) != 0 || (st.st_mode & 07777) != 01777)
      err += "/tmp is not mode 1777\n";
    // Devices work, the tty does not exist.
    const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    err += expect_ok("open /dev/null for writing", null);
    if (null >= 0 && ::write(null, "x", 1) != 1)
      err += "write /dev/null failed\n";
    if (null >= 0)
      ::close(null);
    char byte = 1;
    const int zero = ::open("/dev/zero", O_RDONLY | O_CLOEXEC);
    if (zero < 0 || ::read(zero, &byte, 1) != 1 || byte != 0)
      err += "read /dev/zero failed\n";
    if (zero >= 0)
      ::close(zero);
    err += expect_errno("open /dev/tty", ::open("/dev/tty", O_RDWR), ENOENT);
    if (castellan::test::list_dir("/dev") !=
        std::set<std::string>{"fd", "full", "null", "random", "shm", "stderr", "stdin", "stdout",
                              "urandom", "zero"})
      err += "/dev has [" + castellan::test::join(castellan::test::list_dir("/dev")) + "]\n";
    // /proc shows this pid namespace only: we are PID 1 and alone.
    std::set<std::string> pids;
    for (const auto& e : castellan::test::list_dir("/proc"))
      if (e.find_first_not_of("0123456789") == std::string::npos)
        pids.insert(e);
    if (pids != std::set<std::string>{"1"})
      err += "/proc shows pids [" + castellan::test::join(pids) + "]\n";
    if (report->proc_options.find("subset=pid") != std::string::npos &&
        path_exists("/proc/sys"))
      err += "/proc/sys visible despite subset=pid\n";
    // No host mount is left.
    auto mountinfo = read_text_file("/proc/self/mountinfo");
    if (!mountinfo)
      err += "mountinfo: " + mountinfo.error().describe() + "\n";
    else if (mountinfo->find(" /work") != std::string::npos ||
             mountinfo->find(" /sys") != std::string::npos)
      err += "host mounts visible:\n" + *mountinfo;
    // Identity files and hostname.
    auto passwd = read_text_file("/etc/passwd");
    if (!passwd || passwd->find("sandbox:x:1000:1000") == std::string::npos)
      err += "/etc/passwd lacks the sandbox user\n";
    char host[64] = {};
    ::gethostname(host, sizeof host);
    if (std::string(host) != "sbx")
      err += std::string("hostname is '") + host + "'\n";
    char cwd[256] = {};
    if (!::getcwd(cwd, sizeof cwd) || std::string(cwd) != "/tmp")
      err += std::string("cwd is '") + cwd + "'\n";
    // The interpreter runs in it.
    auto py = castellan::test::run_program(
      {"/usr/bin/python3", "-c",
       "import os, sys, json, ssl, socket, subprocess; "
       "print('ok', os.getuid(), os.getcwd(), socket.gethostname())"});
    if (py.output != "ok 1000 /tmp sbx\n")
      err += "python3 in the new root printed: " + py.output + "\n";
    return err;
  };
  castellan::test::check(castellan::test::run_sandboxed(castellan::test::all_namespaces(), body));
}

BOOST_AUTO_TEST_CASE(workspace_is_writable_and_shared_with_the_host) {
  const std::string dir = temp_dir();
  BOOST_REQUIRE(!dir.empty());
  // The sandbox user is 65534 on the host (root supervisor) or our own uid.
  BOOST_REQUIRE_EQUAL(::chmod(dir.c_str(), 0777), 0);
  default_root_options options;
  options.workspace_source = dir;
  const root_spec spec = default_root_spec(options);
  auto body = [&]() -> std::string {
    auto report = build_root(spec);
    if (!report)
      return "build_root: " + report.error().describe();
    std::string err;
    char cwd[256] = {};
    if (!::getcwd(cwd, sizeof cwd) || std::string(cwd) != "/workspace")
      err += std::string("cwd is '") + cwd + "'\n";
    const int fd = ::open("/workspace/out.txt", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    err += expect_ok("create /workspace/out.txt", fd);
    if (fd >= 0) {
      if (::write(fd, "hello", 5) != 5)
        err += "write failed\n";
      ::close(fd);
    }
    return err;
  };
  castellan::test::check(castellan::test::run_sandboxed(castellan::test::all_namespaces(), body));
  auto out = read_text_file(dir + "/out.txt");
  BOOST_TEST((out && *out == "hello"));
  ::unlink((dir + "/out.txt").c_str());
  ::rmdir(dir.c_str());
}

BOOST_AUTO_TEST_CASE(a_bind_below_tmp_shows_over_the_sandboxs_own_tmp) {
  // The sandbox's /tmp is a tmpfs of its own; a path a policy binds below
  // it must not vanish under that tmpfs.
  const std::string dir = temp_dir();
  BOOST_REQUIRE(!dir.empty());
  BOOST_REQUIRE(::chmod(dir.c_str(), 0755) == 0);
  { std::ofstream(dir + "/data.txt") << "from the host"; }
  default_root_options options;
  root_spec spec = default_root_spec(options);
  bind_mount b;
  b.source = dir;
  b.target = "/tmp/shared";
  spec.binds.push_back(b);
  auto body = [&]() -> std::string {
    auto report = build_root(spec);
    if (!report)
      return "build_root: " + report.error().describe();
    std::string err;
    auto data = read_text_file("/tmp/shared/data.txt");
    if (!data || *data != "from the host")
      err += "the bind below /tmp is hidden\n";
    // /tmp itself is still the sandbox's writable tmpfs.
    const int fd = ::open("/tmp/own.txt", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    err += expect_ok("create /tmp/own.txt", fd);
    if (fd >= 0)
      ::close(fd);
    // The bind is read-only.
    err += expect_errno("write below the bind", ::open("/tmp/shared/new.txt",
                                                       O_CREAT | O_WRONLY | O_CLOEXEC, 0644),
                        EROFS);
    return err;
  };
  castellan::test::check(castellan::test::run_sandboxed(castellan::test::all_namespaces(), body));
  ::unlink((dir + "/data.txt").c_str());
  ::rmdir(dir.c_str());
}

BOOST_AUTO_TEST_CASE(masked_paths_cannot_be_read_below_a_read_only_bind) {
  // A host tree bound at /data: a secret directory, a secret file, a public
  // file, and a symlink that points at the secret file through the root.
  const std::string dir = temp_dir();
  BOOST_REQUIRE(!dir.empty());
  BOOST_REQUIRE_EQUAL(::chmod(dir.c_str(), 0755), 0);
  BOOST_REQUIRE_EQUAL(::mkdir((dir + "/secret").c_str(), 0755), 0);
  std::ofstream(dir + "/secret/key") << "k";
  std::ofstream(dir + "/token") << "t";
  std::ofstream(dir + "/public") << "p";
  BOOST_REQUIRE_EQUAL(::symlink("/data/token", (dir + "/alias").c_str()), 0);
  for (const char* f : {"/secret/key", "/token", "/public"})
    BOOST_REQUIRE_EQUAL(::chmod((dir + f).c_str(), 0644), 0);
  root_spec spec = default_root_spec();
  spec.binds.push_back({dir, "/data", false, false, false, false});
  spec.masked = {"/data/secret", "/data/token", "/data/absent"};
  auto body = [&]() -> std::string {
    auto report = build_root(spec);
    if (!report)
      return "build_root: " + report.error().describe();
    std::string err;
    auto has = [](const std::vector<std::string>& v, const std::string& s) {
      return std::find(v.begin(), v.end(), s) != v.end();
    };
    if (!has(report->mounted, "/data/secret (masked)") ||
        !has(report->mounted, "/data/token (masked)"))
      err += "the masks are not reported as mounted\n";
    if (!has(report->skipped, "/data/absent (masked path missing)"))
      err += "the missing mask is not reported as skipped\n";
    // As the code runs: without capabilities. The covers belong to this
    // uid, so only their read-only mounts stop it from changing their mode.
    if (auto dropped = drop_capabilities(); !dropped)
      return err + "drop_capabilities: " + dropped.error().describe();
    err += expect_errno("chmod the directory mask", ::chmod("/data/secret", 0755), EROFS);
    err += expect_errno("chmod the file mask", ::chmod("/data/token", 0644), EROFS);
    err += expect_errno("open /data/secret/key", ::open("/data/secret/key", O_RDONLY), EACCES);
    err += expect_errno("list /data/secret", ::open("/data/secret", O_RDONLY | O_DIRECTORY),
                        EACCES);
    err += expect_errno("open /data/token", ::open("/data/token", O_RDONLY), EACCES);
    err += expect_errno("open /data/alias (a symlink to the mask)",
                        ::open("/data/alias", O_RDONLY), EACCES);
    err += expect_errno("unmount the mask", ::umount2("/data/token", MNT_DETACH), EPERM);
    const int pub = ::open("/data/public", O_RDONLY | O_CLOEXEC);
    err += expect_ok("open /data/public", pub);
    if (pub >= 0)
      ::close(pub);
    return err;
  };
  castellan::test::check(castellan::test::run_sandboxed(castellan::test::all_namespaces(), body));
  for (const char* f : {"/secret/key", "/token", "/public", "/alias"})
    ::unlink((dir + f).c_str());
  ::rmdir((dir + "/secret").c_str());
  ::rmdir(dir.c_str());
}

BOOST_AUTO_TEST_CASE(writable_root_and_missing_sources) {
  root_spec spec = default_root_spec();
  spec.read_only = false;
  spec.binds.push_back({"/nonexistent/optional", "/opt/optional", false, true, true, false});
  auto body = [&]() -> std::string {
    auto report = build_root(spec);
    if (!report)
      return "build_root: " + report.error().describe();
    std::string err;
    if (report->read_only)
      err += "report says read-only\n";
    if (report->skipped.size() < 1 || report->skipped.back().rfind("/opt/optional", 0) != 0)
      err += "the missing optional bind is not reported as skipped\n";
    err += expect_ok("mkdir /newdir on a writable root", ::mkdir("/newdir", 0755));
    err += expect_errno("create /usr/probe", ::open("/usr/probe", O_CREAT | O_WRONLY, 0644), EROFS);
    return err;
  };
  castellan::test::check(castellan::test::run_sandboxed(castellan::test::all_namespaces(), body));

  root_spec broken = default_root_spec();
  broken.binds.push_back({"/nonexistent/required", "/opt/required", false, true, false, false});
  auto body2 = [&]() -> std::string {
    auto report = build_root(broken);
    if (report)
      return "build_root succeeded with a missing required source";
    if (report.error().code != ENOENT ||
        report.error().message.find("/nonexistent/required") == std::string::npos ||
        report.error().message.find("capture bind source") == std::string::npos)
      return "unexpected error: " + report.error().describe();
    return "";
  };
  castellan::test::check(castellan::test::run_sandboxed(castellan::test::all_namespaces(), body2));
}

BOOST_AUTO_TEST_CASE(bad_paths_are_refused_before_any_mount) {
  root_spec spec;
  spec.binds.push_back({"/usr", "usr", false, true, false, false});
  BOOST_TEST(!validate(spec));
  spec.binds = {{"/usr", "/usr/../etc", false, true, false, false}};
  BOOST_TEST(!validate(spec));
  spec.binds = {{"/usr", "/usr", false, true, false, false},
                {"/usr", "/usr", false, true, false, false}};
  auto dup = validate(spec);
  BOOST_REQUIRE(!dup);
  BOOST_TEST(dup.error().message.find("twice") != std::string::npos);
  spec.binds = {{"relative", "/x", false, true, false, false}};
  BOOST_TEST(!validate(spec));
  spec.binds = {{"/usr", "/proc", false, true, false, false}};
  BOOST_TEST(!validate(spec)); // /proc is the fresh procfs
  spec.binds.clear();
  spec.symlinks = {{"/bin/", "usr/bin"}};
  BOOST_TEST(!validate(spec));
  spec.symlinks.clear();
  spec.masked = {"/"};
  BOOST_TEST(!validate(spec)); // the root itself cannot be covered
  spec.masked = {"/data/../etc"};
  BOOST_TEST(!validate(spec));
  BOOST_TEST(static_cast<bool>(validate(default_root_spec())));
}

BOOST_AUTO_TEST_CASE(worker_spec_mount_entries_map_onto_the_root) {
  root_spec spec = default_root_spec();
  std::vector<mount_entry> entries(3);
  entries[0].what = mount_entry::kind::bind;
  entries[0].source = "/srv/data";
  entries[0].target = "/data";
  entries[0].read_only = false;
  entries[1].what = mount_entry::kind::tmpfs;
  entries[1].target = "/tmp";
  entries[1].size_bytes = 1 << 20;
  entries[2].what = mount_entry::kind::proc;
  BOOST_REQUIRE(add_mount_entries(spec, entries));
  BOOST_TEST(spec.binds.back().target == "/data");
  BOOST_TEST(spec.binds.back().writable);
  std::size_t tmp = 0;
  for (const auto& t : spec.tmpfs)
    if (t.target == "/tmp") {
      ++tmp;
      BOOST_TEST(t.size_bytes == 1u << 20);
    }
  BOOST_TEST(tmp == 1u);
  entries[0].target = "data";
  BOOST_TEST(!add_mount_entries(spec, entries));
}

BOOST_AUTO_TEST_SUITE_END()
