// clients/python as its users get it: installed by pip from the source tree
// (offline, with Debian's pip and setuptools) into a private directory, then
// client_script.py, which uses that copy, against a real `castellan serve`
// with a unix socket, a loopback TCP listener and a TLS listener (a
// self-signed certificate made here) that need a bearer token, and two pools. The script's failures fail this test, with its output.

#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "support/build_paths.hpp"
#include "support/run_process.hpp"

using castellan::test::run_process;

namespace {

const char* const python = "/usr/bin/python3";

/// A private directory (0700), removed afterwards.
struct work_dir {
  std::string path;
  work_dir() {
    char tmpl[] = "/tmp/castellan-pyclient-XXXXXX";
    BOOST_REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~work_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string write(const std::string& name, const std::string& text, mode_t mode) const {
    const std::string file = path + "/" + name;
    std::ofstream(file, std::ios::binary) << text;
    ::chmod(file.c_str(), mode);
    return file;
  }
};

/// `castellan serve --config FILE`, its stdout on a pipe.
struct daemon_process {
  pid_t pid = -1;
  int out = -1;
  int exit_status = -1;

  explicit daemon_process(const std::string& config) {
    std::vector<std::string> argv = {castellan::test::castellan_cli(), "serve", "--config", config};
    int o[2];
    BOOST_REQUIRE(::pipe2(o, O_CLOEXEC) == 0);
    pid = ::fork();
    BOOST_REQUIRE(pid >= 0);
    if (pid == 0) {
      ::dup2(o[1], 1);
      std::vector<char*> v;
      for (auto& a : argv)
        v.push_back(a.data());
      v.push_back(nullptr);
      ::execv(v[0], v.data());
      ::_exit(127);
    }
    ::close(o[1]);
    out = o[0];
  }

  /// The next line on stdout, without its newline (30 s safety net).
  std::string line() {
    std::string l;
    char c;
    while (l.empty() || l.back() != '\n') {
      pollfd p{out, POLLIN, 0};
      BOOST_REQUIRE_MESSAGE(::poll(&p, 1, 30000) == 1, "castellan serve printed no line: " << l);
      BOOST_REQUIRE_MESSAGE(::read(out, &c, 1) == 1, "castellan serve's stdout closed: " << l);
      l += c;
    }
    l.pop_back();
    return l;
  }

  /// SIGTERM, then its exit status (60 s safety net, then SIGKILL and fail).
  int stop() {
    ::kill(pid, SIGTERM);
    for (int i = 0; i < 6000 && exit_status < 0; ++i) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid)
        exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      else
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (exit_status < 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      BOOST_FAIL("castellan serve did not exit within 60 s");
    }
    return exit_status;
  }

  ~daemon_process() {
    if (exit_status < 0 && pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    ::close(out);
  }
};

std::string last_line(std::string text) {
  while (!text.empty() && text.back() == '\n')
    text.pop_back();
  return text.substr(text.rfind('\n') + 1);
}

} // namespace

BOOST_AUTO_TEST_SUITE(python_client)

BOOST_AUTO_TEST_CASE(the_pip_installed_client_passes_its_script_against_a_real_daemon) {
  work_dir dir;

  // pip builds in the directory it is given: a copy, so that the source
  // tree gets no build/ or egg-info.
  const std::string src = dir.path + "/src";
  std::filesystem::copy(castellan::test::source_dir() + "/clients/python", src,
                        std::filesystem::copy_options::recursive);
  const std::string site = dir.path + "/site";
  auto pip = run_process({"/usr/bin/env", "PIP_DISABLE_PIP_VERSION_CHECK=1", python, "-m", "pip",
                          "install", "--no-build-isolation", "--no-deps", "--no-index",
                          "--root-user-action=ignore", "--target", site, src},
                         {}, 120);
  BOOST_REQUIRE_MESSAGE(pip.exit_code == 0, "pip install failed:\n" << pip.out << pip.err);
  BOOST_REQUIRE(std::filesystem::exists(site + "/castellan_client/client.py"));

  auto token_new = run_process({castellan::test::castellan_cli(), "token", "new", "--name", "py"});
  BOOST_REQUIRE_MESSAGE(token_new.exit_code == 0, token_new.err);
  const std::string token = last_line(token_new.err);
  dir.write("tokens.toml", token_new.out, 0600);
  auto cert = run_process({"/usr/bin/openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                           "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                           dir.path + "/key.pem", "-out", dir.path + "/cert.pem", "-days", "2",
                           "-subj", "/CN=localhost", "-addext",
                           "subjectAltName=DNS:localhost,IP:127.0.0.1"});
  BOOST_REQUIRE_MESSAGE(cert.exit_code == 0, cert.err);
  BOOST_REQUIRE(::chmod((dir.path + "/key.pem").c_str(), 0600) == 0);
  const std::string sock = dir.path + "/api.sock";
  const std::string config = dir.write(
      "castellan.toml",
      "listen = [\"unix:" + sock + "\", \"tcp:127.0.0.1:0\", \"tls:127.0.0.1:0\"]\n" +
          "state_dir = \"" + dir.path + "/state\"\n" +
          "[auth]\ntokens_file = \"tokens.toml\"\nallow_plaintext_loopback = true\n"
          "[tls]\ncert_file = \"cert.pem\"\nkey_file = \"key.pem\"\n"
          "[audit]\nevents = [\"exec_start\", \"exec_end\"]\n"
          // client_script.py checks the answers of a daemon without a store.
          "[workspaces]\nenabled = false\n"
          "[[pools]]\nname = \"default\"\nsize = 2\n"
          "[[pools]]\nname = \"tiny\"\nsize = 1\nqueue_limit = 1\nmode = \"shared\"\n",
      0644);
  daemon_process daemon(config);
  BOOST_REQUIRE_EQUAL(daemon.line(), "castellan: listening on unix:" + sock);
  const std::string tcp = daemon.line();
  const std::string prefix = "castellan: listening on tcp:";
  BOOST_REQUIRE_MESSAGE(tcp.rfind(prefix, 0) == 0u, tcp);
  const std::string tls = daemon.line();
  const std::string tls_prefix = "castellan: listening on tls:127.0.0.1:";
  BOOST_REQUIRE_MESSAGE(tls.rfind(tls_prefix, 0) == 0u, tls);

  auto script = run_process(
      {"/usr/bin/env", "PYTHONPATH=" + site, "PYTHONDONTWRITEBYTECODE=1",
       "CASTELLAN_SOCKET=" + sock, "CASTELLAN_TCP=http://" + tcp.substr(prefix.size()),
       "CASTELLAN_TLS_PORT=" + tls.substr(tls_prefix.size()),
       "CASTELLAN_CA_FILE=" + dir.path + "/cert.pem", "CASTELLAN_TOKEN=" + token, python, "-s",
       castellan::test::source_dir() + "/test/clients/python/client_script.py"},
      {}, 240);
  BOOST_TEST_MESSAGE(script.err);
  BOOST_TEST(script.exit_code == 0, "client_script.py failed:\n" << script.out << script.err);
  // The copy pip installed was the one imported, not the source tree's.
  BOOST_TEST(script.err.find("from " + site + "/castellan_client/__init__.py") !=
                 std::string::npos,
             script.err);
  BOOST_TEST(script.err.find("\nOK\n") != std::string::npos, script.err);
  BOOST_TEST(daemon.stop() == 0);
}

BOOST_AUTO_TEST_SUITE_END()
