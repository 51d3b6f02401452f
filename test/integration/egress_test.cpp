// End to end through the real `castellan` binary: sandboxed code reaches
// loopback test servers only through the egress proxy, as its policy says.
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "support/build_paths.hpp"
#include "support/run_process.hpp"

using castellan::test::castellan_cli;
using castellan::test::run_process;
using castellan::test::source_dir;

namespace {

std::string egress_policy() {
  return source_dir() + "/test/integration/data/egress/egress.json";
}

/// The HTTP and HTTPS servers of data/egress/servers.py on 127.0.0.2, for
/// the life of one test.
class loopback_servers {
public:
  loopback_servers() {
    char dir_template[] = "/tmp/castellan-egress-XXXXXX";
    BOOST_REQUIRE(::mkdtemp(dir_template) != nullptr);
    dir_ = dir_template;
    int in[2], out[2];
    BOOST_REQUIRE(::pipe2(in, O_CLOEXEC) == 0 && ::pipe2(out, O_CLOEXEC) == 0);
    const std::string script = source_dir() + "/test/integration/data/egress/servers.py";
    pid_ = ::fork();
    BOOST_REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::execlp("python3", "python3", script.c_str(), dir_.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    stdin_ = in[1];
    std::string line;
    pollfd p{out[0], POLLIN, 0};
    while (line.find('\n') == std::string::npos && ::poll(&p, 1, 20000) > 0) {
      char buf[256];
      const ssize_t n = ::read(out[0], buf, sizeof buf);
      if (n <= 0)
        break;
      line.append(buf, static_cast<std::size_t>(n));
    }
    ::close(out[0]);
    std::istringstream fields(line);
    long pid = 0;
    fields >> pid >> http_port >> https_port;
    BOOST_REQUIRE_MESSAGE(http_port != 0 && https_port != 0,
                          "the test servers did not start: '" << line << "'");
  }

  ~loopback_servers() {
    ::close(stdin_); // servers.py exits when its stdin closes
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
    std::remove((dir_ + "/cert.pem").c_str());
    std::remove((dir_ + "/key.pem").c_str());
    ::rmdir(dir_.c_str());
  }

  std::string http(const std::string& path = "/") const {
    return "http://127.0.0.2:" + std::to_string(http_port) + path;
  }
  std::string https(const std::string& path = "/") const {
    return "https://127.0.0.2:" + std::to_string(https_port) + path;
  }

  unsigned http_port = 0;
  unsigned https_port = 0;

private:
  std::string dir_;
  pid_t pid_ = -1;
  int stdin_ = -1;
};

castellan::test::process_result exec_code(const std::string& code,
                                          const std::string& audit_log = {}) {
  std::vector<std::string> args = {castellan_cli(), "exec", "--policy", egress_policy()};
  if (!audit_log.empty())
    args.insert(args.end(), {"--audit-log", audit_log});
  args.push_back(code);
  return run_process(args);
}

castellan::test::process_result run_curl(std::vector<std::string> curl_args) {
  std::vector<std::string> args = {castellan_cli(), "run", "--policy", egress_policy(), "--",
                                   "/usr/bin/curl", "-sS", "--max-time", "10"};
  args.insert(args.end(), curl_args.begin(), curl_args.end());
  return run_process(args);
}

/// Python that asks the proxy (HTTP_PROXY) for `url` and prints the status
/// and the body's first line.
std::string through_proxy(const std::string& url) {
  return "import http.client, os, urllib.parse\n"
         "p = urllib.parse.urlsplit(os.environ['HTTP_PROXY'])\n"
         "c = http.client.HTTPConnection(p.hostname, p.port, timeout=10)\n"
         "c.request('GET', '" + url + "')\n"
         "r = c.getresponse()\n"
         "print(r.status, r.read().decode().strip())\n";
}

} // namespace

BOOST_AUTO_TEST_SUITE(cli_egress)

BOOST_AUTO_TEST_CASE(urllib_reaches_an_allowed_host_over_http_and_https) {
  loopback_servers servers;
  char log_template[] = "/tmp/castellan-egress-audit-XXXXXX";
  const int log_fd = ::mkstemp(log_template);
  BOOST_REQUIRE(log_fd >= 0);
  ::close(log_fd);
  const std::string log = log_template;
  auto r = exec_code("import os, ssl, urllib.request\n"
                     "print(os.environ['HTTPS_PROXY'])\n"
                     "print(urllib.request.urlopen('" + servers.http("/plain") +
                       "', timeout=10).read().decode().strip())\n"
                     "ctx = ssl._create_unverified_context()\n"
                     "print(urllib.request.urlopen('" + servers.https("/secret") +
                       "', timeout=10, context=ctx).read().decode().strip())\n",
                     log);
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(r.out == "http://127.0.0.1:3128\nhello /plain\nhello /secret\n", r.out << r.err);
  // Both connections are audit records with the rule that allowed them.
  std::ifstream in(log);
  std::string line;
  int get = 0, tunnel = 0;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || j["kind"] != "connection")
      continue;
    BOOST_TEST(j["decision"] == "allow", line);
    BOOST_TEST(j["rule"] == "/net/rules/0", line);
    BOOST_TEST(j["address"] == "127.0.0.2", line);
    BOOST_TEST(j["exec_id"].get<uint64_t>() != 0u, line);
    BOOST_TEST(j["bytes_in"].get<uint64_t>() > 0u, line);
    if (j["method"] == "GET")
      ++get;
    if (j["method"] == "CONNECT")
      ++tunnel;
  }
  std::remove(log.c_str());
  BOOST_TEST(get == 1);
  BOOST_TEST(tunnel == 1);
}

BOOST_AUTO_TEST_CASE(denied_hosts_and_private_addresses_get_403_naming_the_rule) {
  loopback_servers servers;
  const std::string port = std::to_string(servers.http_port);
  // A host on the deny list; a name allowed by the host list that resolves
  // to 127.0.0.1; the metadata address allowed by the host list; a host
  // missing from the allow list.
  auto r = exec_code(through_proxy("http://127.0.0.3:" + port + "/") +
                     through_proxy("http://localhost:" + port + "/") +
                     through_proxy("http://169.254.169.254/latest/meta-data/") +
                     through_proxy("http://example.com/"));
  BOOST_TEST(r.exit_code == 0, r.err);
  std::istringstream lines(r.out);
  std::string deny_list, loopback, metadata, unlisted;
  std::getline(lines, deny_list);
  std::getline(lines, loopback);
  std::getline(lines, metadata);
  std::getline(lines, unlisted);
  BOOST_TEST(deny_list == "403 castellan egress: denied 127.0.0.3:" + port +
                            " by /net/hosts/deny/0");
  BOOST_TEST(loopback.find("403 castellan egress: denied localhost:" + port +
                           " (127.0.0.1) by special-range: loopback") == 0u,
             loopback);
  BOOST_TEST(metadata.find("403 castellan egress: denied 169.254.169.254:80 by special-range: "
                           "link-local incl. cloud metadata") == 0u,
             metadata);
  BOOST_TEST(unlisted == "403 castellan egress: denied example.com:80 by /net/hosts/allow");
}

BOOST_AUTO_TEST_CASE(https_to_a_refused_address_fails_the_tunnel) {
  auto r = exec_code("import urllib.request\n"
                     "try:\n"
                     "    urllib.request.urlopen('https://169.254.169.254/', timeout=10)\n"
                     "except OSError as e:\n"
                     "    print('refused:', e)\n");
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(r.out.find("refused:") == 0u, r.out);
  BOOST_TEST(r.out.find("403") != std::string::npos, r.out);
}

BOOST_AUTO_TEST_CASE(curl_in_command_mode_behaves_the_same) {
  loopback_servers servers;
  auto plain = run_curl({servers.http("/by-curl")});
  BOOST_TEST(plain.exit_code == 0, plain.err);
  BOOST_TEST(plain.out == "hello /by-curl\n", plain.err);
  auto tls = run_curl({"-k", servers.https("/tls-by-curl")});
  BOOST_TEST(tls.exit_code == 0, tls.err);
  BOOST_TEST(tls.out == "hello /tls-by-curl\n", tls.err);
  // localhost bypasses the proxy by NO_PROXY; asked through the proxy it is refused.
  auto loopback = run_curl({"--noproxy", "", "-o", "/dev/null", "-w", "%{http_code}",
                            "http://localhost:" + std::to_string(servers.http_port) + "/"});
  BOOST_TEST(loopback.out == "403", loopback.err);
  auto metadata = run_curl({"-o", "/dev/null", "-w", "%{http_code}",
                            "http://169.254.169.254/latest/meta-data/"});
  BOOST_TEST(metadata.out == "403", metadata.err);
}

BOOST_AUTO_TEST_CASE(a_direct_connect_fails) {
  loopback_servers servers;
  auto r = exec_code("import socket\n"
                     "for addr in [('127.0.0.2', " + std::to_string(servers.http_port) +
                     "), ('1.1.1.1', 80), ('169.254.169.254', 80)]:\n"
                     "    s = socket.socket()\n"
                     "    s.settimeout(5)\n"
                     "    try:\n"
                     "        s.connect(addr)\n"
                     "        print('connected', addr)\n"
                     "    except OSError as e:\n"
                     "        print('failed', e.errno)\n");
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(r.out.find("connected") == std::string::npos, r.out);
  BOOST_TEST(r.out.find("failed") == 0u, r.out);
}

BOOST_AUTO_TEST_CASE(a_policy_without_network_gets_no_relay) {
  auto r = run_process({castellan_cli(), "exec",
                        "import os, socket\n"
                        "print(os.environ.get('HTTP_PROXY'))\n"
                        "s = socket.socket()\n"
                        "try:\n"
                        "    s.connect(('127.0.0.1', 3128))\n"
                        "    print('connected')\n"
                        "except OSError as e:\n"
                        "    print('failed')\n"});
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(r.out == "None\nfailed\n");
}

BOOST_AUTO_TEST_SUITE_END()
