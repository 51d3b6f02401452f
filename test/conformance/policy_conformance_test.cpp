/// @file policy_conformance_test.cpp
/// Does the kernel do what `castellan policy explain` says? For every
/// pre-built policy, a pool is started from it and each generated operation
/// (create, write, read, truncate, list, remove across the sandbox's tree;
/// run a program) runs as one exec in that pool's sandbox. Its outcome is
/// compared with decide_in_sandbox — what `policy explain` prints for the
/// same query — on the sandbox spec the pool's workers get. Every
/// disagreement is printed with its policy, operation and both answers, and
/// the test fails unless there are none.
///
/// An operation on a path the sandbox does not have (ENOENT) has nothing to
/// compare and is counted apart; so is one whose precondition failed (the
/// file it needs could not be created under this policy).
///
/// Network operations (TCP and UDP connect/send and bind on the sandbox's
/// loopback, to addresses off it, and CONNECTs through the egress relay)
/// run in one exec per policy, with the pool's egress proxy, and their
/// outcome (done, refused, unreachable) is compared with
/// decide_net_in_sandbox on the same spec, relay included. A TCP connect
/// refused because nothing listens (no listener could be started) is no
/// policy verdict and is counted apart.

#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <algorithm>
#include <map>
#include <optional>
#include <sstream>

#include "actors/policy/engine/compiled_policy.hpp"
#include "actors/policy/engine/fs_access.hpp"
#include "actors/policy/engine/policy_loader.hpp"
#include "actors/pool/sandbox_fs_rights.hpp"
#include "actors/pool/sandbox_net_rights.hpp"
#include "actors/pool/pool_policy.hpp"
#include "actors/pool/sandbox_profile.hpp"
#include "actors/proxy/proxy_actor.hpp"
#include "platform/linux/host_permissions.hpp"
#include "support/actor_system_fixture.hpp"

#include <nlohmann/json.hpp>

using namespace castellan;
namespace pol = castellan::policy;

namespace {

struct operation {
  std::string perm; ///< a policy permission name, or "exec"
  std::string path;
};

/// The operations, in order: what one creates, the next ones use.
std::vector<operation> operations(const std::string& host_dir,
                                  const std::vector<std::string>& writable_dirs) {
  std::vector<operation> ops;
  for (const std::string& dir : std::vector<std::string>{"/tmp", "/dev/shm"}) {
    const std::string f = dir + "/conformance-file";
    const std::string d = dir + "/conformance-dir";
    ops.push_back({"make_reg", f});
    ops.push_back({"write_file", f});
    ops.push_back({"read_file", f});
    ops.push_back({"truncate", f});
    ops.push_back({"make_dir", d});
    ops.push_back({"read_dir", d});
    ops.push_back({"remove_dir", d});
    ops.push_back({"remove_file", f});
    ops.push_back({"read_dir", dir});
  }
  for (const std::string& dir : std::vector<std::string>{"/", "/etc", "/usr", "/usr/lib", "/proc",
                                                        "/dev", sandbox_harness_dir}) {
    ops.push_back({"make_reg", (dir == "/" ? "" : dir) + "/conformance-new"});
    ops.push_back({"make_dir", (dir == "/" ? "" : dir) + "/conformance-newdir"});
    ops.push_back({"read_dir", dir});
  }
  for (const char* f :
       {"/etc/passwd", "/etc/group", "/etc/hosts", "/etc/nsswitch.conf", "/etc/ld.so.cache",
        "/etc/localtime", "/etc/ssl/openssl.cnf", "/etc/services", "/etc/shadow",
        "/usr/bin/python3", "/bin/sh", "/lib64/ld-linux-x86-64.so.2", "/proc/self/status",
        "/proc/1/status", "/dev/null", "/dev/zero", "/dev/urandom"}) {
    ops.push_back({"read_file", f});
    ops.push_back({"write_file", f});
  }
  ops.push_back({"read_file", std::string(sandbox_harness_dir) + "/castellan_wire.py"});
  ops.push_back({"write_file", std::string(sandbox_harness_dir) + "/castellan_wire.py"});
  ops.push_back({"remove_file", std::string(sandbox_harness_dir) + "/castellan_wire.py"});
  ops.push_back({"remove_file", "/etc/hosts"});
  ops.push_back({"remove_file", "/usr/bin/python3"});
  // A host directory the policy binds (the test adds a read rule for it).
  ops.push_back({"read_dir", host_dir});
  ops.push_back({"read_file", host_dir + "/data.txt"});
  ops.push_back({"write_file", host_dir + "/data.txt"});
  ops.push_back({"make_reg", host_dir + "/conformance-new"});
  // Host directories the policy makes writable: one the sandbox's host uid
  // owns, one it does not (the host's mode bits refuse what the policy allows).
  for (const auto& dir : writable_dirs) {
    ops.push_back({"make_reg", dir + "/conformance-new"});
    ops.push_back({"write_file", dir + "/data.txt"});
    ops.push_back({"read_file", dir + "/data.txt"});
    ops.push_back({"make_dir", dir + "/conformance-dir"});
    ops.push_back({"remove_dir", dir + "/conformance-dir"});
    ops.push_back({"remove_file", dir + "/conformance-new"});
  }
  for (const char* prog : {"/usr/bin/python3", "/bin/sh", "/usr/bin/id", "/usr/bin/env"})
    ops.push_back({"exec", prog});
  return ops;
}

/// Python that performs `op` and prints "ok" or the errno's name.
std::string code_for(const operation& op) {
  std::ostringstream py;
  py << "import errno, os, subprocess\nP = " << nlohmann::json(op.path).dump() << "\n";
  std::string call;
  if (op.perm == "read_file")
    call = "open(P, 'rb').close()";
  else if (op.perm == "write_file")
    call = "os.close(os.open(P, os.O_WRONLY))";
  else if (op.perm == "truncate")
    call = "os.truncate(P, 0)";
  else if (op.perm == "make_reg")
    call = "os.close(os.open(P, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))";
  else if (op.perm == "make_dir")
    call = "os.mkdir(P)";
  else if (op.perm == "read_dir")
    call = "os.listdir(P)";
  else if (op.perm == "remove_file")
    call = "os.unlink(P)";
  else if (op.perm == "remove_dir")
    call = "os.rmdir(P)";
  if (op.perm == "exec") {
    py << "try:\n"
          "    args = [P, '-c', 'pass'] if 'python' in P else [P, '-c', 'exit 0'] if P.endswith('/sh') else [P]\n"
          "    # pipes, not /dev/null: opening it for writing is a policy question of its own\n"
          "    r = subprocess.run(args, input=b'', capture_output=True, timeout=20)\n"
          "    print('ok' if r.returncode == 0 else 'exit%d' % r.returncode)\n"
          "except OSError as e:\n"
          "    print(errno.errorcode.get(e.errno, str(e.errno)))\n";
  } else {
    py << "try:\n    " << call << "\n    print('ok')\n"
       << "except OSError as e:\n    print(errno.errorcode.get(e.errno, str(e.errno)))\n";
  }
  return py.str();
}

/// What explain says: allow (true) or deny (false).
bool explained_allow(const platform::sandbox_spec& spec, const pol::compiled_policy& policy,
                     const operation& op, std::string& by) {
  if (op.perm == "exec") {
    const pol::decision e = policy.check_exec(op.path);
    const sandbox_decision fs =
      decide_in_sandbox(spec, policy, op.path, pol::to_access(pol::fs_perm::execute));
    by = std::string("exec ") + std::string(e.pointer) + ", fs " + fs.by;
    return e.verdict != pol::action::deny && fs.verdict != pol::action::deny;
  }
  auto perm = pol::parse_fs_perm(op.perm);
  BOOST_REQUIRE_MESSAGE(perm, "unknown permission " << op.perm);
  const sandbox_decision d = decide_in_sandbox(spec, policy, op.path, *perm);
  by = d.by;
  return d.verdict != pol::action::deny;
}

struct net_operation {
  net_call call; ///< connect, bind or relay
  pol::net_proto proto;
  std::string address;
  uint16_t port;
  /// "fastopen": a TCP connect made by sendto with MSG_FASTOPEN (which the
  /// kernel's connect hook, and so Landlock, never sees); "mptcp": on an
  /// IPPROTO_MPTCP socket (which Landlock's TCP rules do not cover); "": a
  /// plain socket call.
  std::string via;
};

std::string describe(const net_operation& op) {
  const bool v6 = op.address.find(':') != std::string::npos;
  return std::string(to_string(op.call)) + ":" + std::string(pol::to_string(op.proto)) + ":" +
         (v6 ? "[" + op.address + "]" : op.address) + ":" + std::to_string(op.port) +
         (op.via.empty() ? "" : " (" + op.via + ")");
}

/// On the sandbox's loopback: bind (an unprivileged and a privileged port)
/// and connect/send (an ordinary port, the relay's, DNS's), TCP and UDP,
/// IPv4 and IPv6, also through the unspecified and IPv4-mapped addresses;
/// off it: TCP and UDP to private, link-local (the metadata address),
/// documentation and public-looking addresses, directly and through the
/// relay. TCP Fast Open and MPTCP where plain TCP is refused.
std::vector<net_operation> net_operations(uint16_t relay_port) {
  std::vector<net_operation> ops;
  auto add = [&](net_call call, pol::net_proto proto, const char* address, uint16_t port,
                 const char* via = "") { ops.push_back({call, proto, address, port, via}); };
  for (const char* a : {"127.0.0.1", "::1"})
    for (auto proto : {pol::net_proto::tcp, pol::net_proto::udp}) {
      for (uint16_t port : {uint16_t{8080}, uint16_t{80}})
        add(net_call::bind, proto, a, port);
      for (uint16_t port : {uint16_t{8081}, relay_port, uint16_t{53}})
        add(net_call::connect, proto, a, port);
    }
  for (auto proto : {pol::net_proto::tcp, pol::net_proto::udp}) {
    add(net_call::bind, proto, "0.0.0.0", 8082);
    add(net_call::bind, proto, "::", 8082);
  }
  for (const char* a : {"0.0.0.0", "::", "::ffff:127.0.0.1"})
    add(net_call::connect, pol::net_proto::udp, a, 8083);
  add(net_call::connect, pol::net_proto::tcp, "127.0.0.1", 8084, "fastopen");
  add(net_call::connect, pol::net_proto::tcp, "::1", 8084, "fastopen");
  add(net_call::bind, pol::net_proto::tcp, "127.0.0.1", 8085, "mptcp");
  add(net_call::connect, pol::net_proto::tcp, "127.0.0.1", 8086, "mptcp");
  add(net_call::relay, pol::net_proto::tcp, "127.0.0.1", 8080);
  for (const char* a :
       {"10.0.0.1", "169.254.169.254", "192.0.2.1", "93.184.216.34", "2001:db8::1"}) {
    for (uint16_t port : {uint16_t{443}, relay_port})
      add(net_call::connect, pol::net_proto::tcp, a, port);
    add(net_call::connect, pol::net_proto::tcp, a, 443, "fastopen");
    add(net_call::connect, pol::net_proto::tcp, a, 443, "mptcp");
    for (uint16_t port : {uint16_t{53}, uint16_t{443}})
      add(net_call::connect, pol::net_proto::udp, a, port);
    for (uint16_t port : {uint16_t{443}, uint16_t{5432}})
      add(net_call::relay, pol::net_proto::tcp, a, port);
  }
  return ops;
}

/// Python that performs every operation of `ops` and prints one JSON list
/// of outcomes: "ok", an errno's name, "nolistener" (a TCP connect refused
/// where no listener could be started first), or "http<status>" for a
/// CONNECT through the relay. Each operation has its own sockets and (on
/// loopback) its own port, so none can change another's outcome; the
/// relay's run side by side, since each may wait for the proxy's upstream.
std::string net_code_for(const std::vector<net_operation>& ops, uint16_t relay_port) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& op : ops)
    list.push_back({to_string(op.call), pol::to_string(op.proto), op.address, op.port, op.via});
  std::ostringstream py;
  py << "import errno, json, socket, threading\n"
     << "OPS = json.loads(" << nlohmann::json(list.dump()).dump() << ")\n"
     << "RELAY = " << relay_port << "\n";
  py << R"(LOCAL = ('127.0.0.1', '::1', '0.0.0.0', '::', '::ffff:127.0.0.1')
out = [None] * len(OPS)
def fam(a): return socket.AF_INET6 if ':' in a else socket.AF_INET
def kind(p): return socket.SOCK_STREAM if p == 'tcp' else socket.SOCK_DGRAM
IPPROTO_MPTCP = 262
def sock(p, a, via):
    return socket.socket(fam(a), kind(p), IPPROTO_MPTCP if via == 'mptcp' else 0)
def do_bind(p, a, port, via):
    s = sock(p, a, via)
    try:
        s.bind((a, port))
        if p == 'tcp':
            s.listen(1)
    finally:
        s.close()
    return 'ok'
def do_connect(p, a, port, via):
    # On loopback a listener first: a refusal is then the sandbox's, not
    # the absence of a peer.
    listener = None
    if a in LOCAL:
        try:
            listener = sock(p, a, via)
            listener.bind((a, port))
            if p == 'tcp':
                listener.listen(1)
        except OSError:
            if listener is not None:
                listener.close()
            listener = None
    s = sock(p, a, via)
    s.settimeout(5)
    try:
        if via == 'fastopen':
            s.sendto(b'conformance', socket.MSG_FASTOPEN, (a, port))
        elif p == 'tcp':
            s.connect((a, port))
        else:
            s.sendto(b'conformance', (a, port))
            if listener is not None:
                # Loopback delivers at once; 'sent' is a datagram the
                # kernel took but nobody received.
                listener.settimeout(1)
                try:
                    if listener.recv(64) != b'conformance':
                        return 'garbled'
                except TimeoutError:
                    return 'sent'
        return 'ok'
    except ConnectionRefusedError:
        if listener is None:
            return 'nolistener'
        raise
    finally:
        s.close()
        if listener is not None:
            listener.close()
def do_relay(p, a, port, via):
    dest = ('[%s]' % a if ':' in a else a) + ':%d' % port
    s = socket.create_connection(('127.0.0.1', RELAY), timeout=25)
    try:
        s.sendall(('CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n' % (dest, dest)).encode())
        head = b''
        while b'\r\n' not in head:
            chunk = s.recv(4096)
            if not chunk:
                break
            head += chunk
    finally:
        s.close()
    parts = head.split(b' ')
    return 'http' + parts[1].decode() if head.startswith(b'HTTP/') and len(parts) > 1 else 'closed'
def run(i):
    call, p, a, port, via = OPS[i]
    try:
        out[i] = {'bind': do_bind, 'connect': do_connect, 'relay': do_relay}[call](p, a, port, via)
    except OSError as e:
        out[i] = errno.errorcode.get(e.errno, str(e.errno)) if e.errno else type(e).__name__
threads = [threading.Thread(target=run, args=(i,)) for i in range(len(OPS)) if OPS[i][0] == 'relay']
for t in threads:
    t.start()
for i in range(len(OPS)):
    if OPS[i][0] != 'relay':
        run(i)
for t in threads:
    t.join()
print(json.dumps(out))
)";
  return py.str();
}

/// The kernel's (or the relay's) answer as an outcome, or nothing for one
/// that is no answer of the sandbox's ("nolistener") or no answer at all.
std::optional<net_outcome> classify(const std::string& outcome) {
  // "sent": a datagram the kernel took and nobody received. Through the
  // relay: let through, whatever the upstream did.
  if (outcome == "ok" || outcome == "sent" || outcome == "http200" || outcome == "http502" ||
      outcome == "http504")
    return net_outcome::done;
  // EOPNOTSUPP (Python names it ENOTSUP): a TCP Fast Open send;
  // ENOPROTOOPT: an MPTCP socket. The sandbox turns both off.
  if (outcome == "EACCES" || outcome == "EPERM" || outcome == "policy_kill" ||
      outcome == "http403" || outcome == "EOPNOTSUPP" || outcome == "ENOTSUP" ||
      outcome == "ENOPROTOOPT")
    return net_outcome::refused;
  if (outcome == "ENETUNREACH" || outcome == "EHOSTUNREACH" || outcome == "EADDRNOTAVAIL")
    return net_outcome::unreachable;
  return std::nullopt;
}

struct conformance_fixture : test::actor_system_fixture {
  std::string host_dir;
  std::vector<std::string> writable_dirs;
  conformance_fixture() {
    host_dir = make_dir();
    std::ofstream(host_dir + "/data.txt") << "host data\n";
    // Writable by the policy: owned by root, and by the sandbox's host uid
    // (65534 under a root supervisor, else the supervisor's own).
    auto ids = platform::default_sandbox_host_ids();
    BOOST_REQUIRE_MESSAGE(ids, (ids ? "" : ids.error().describe()));
    for (const uid_t owner : {uid_t{0}, uid_t(ids->uid)}) {
      const std::string dir = make_dir();
      std::ofstream(dir + "/data.txt") << "host data\n";
      if (::geteuid() == 0) {
        BOOST_REQUIRE(::chown(dir.c_str(), owner, owner) == 0);
        BOOST_REQUIRE(::chown((dir + "/data.txt").c_str(), owner, owner) == 0);
      }
      writable_dirs.push_back(dir);
    }
  }
  ~conformance_fixture() {
    std::error_code ec;
    std::filesystem::remove_all(host_dir, ec);
    for (const auto& d : writable_dirs)
      std::filesystem::remove_all(d, ec);
  }
  static std::string make_dir() {
    char pattern[] = "/var/tmp/castellan-conformance-XXXXXX";
    BOOST_REQUIRE(::mkdtemp(pattern) != nullptr);
    ::chmod(pattern, 0755);
    return pattern;
  }
  /// What an earlier policy's operations left in the writable directories.
  void reset_writable_dirs() const {
    std::error_code ec;
    for (const auto& d : writable_dirs) {
      std::filesystem::remove_all(d + "/conformance-new", ec);
      std::filesystem::remove_all(d + "/conformance-dir", ec);
    }
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(policy_conformance, conformance_fixture)

BOOST_AUTO_TEST_CASE(every_prebuilt_policy_does_what_explain_says) {
  const std::string dir = test::source_dir() + "/policies";
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".json" && e.path().stem() != "schema")
      names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  BOOST_REQUIRE(names.size() >= 10u);

  const auto ops = operations(host_dir, writable_dirs);
  std::size_t compared = 0, absent = 0, disagreements = 0;
  std::map<std::string, std::size_t> outcomes;
  // The egress proxy a supervisor gives its pools: a policy that allows
  // network then gets the relay, as in production.
  auto proxy = spawn_proxy(sys, proxy_config{});
  const uint16_t relay = pool_config{}.egress_port;
  const auto net_ops = net_operations(relay);
  std::size_t net_compared = 0, net_apart = 0, net_unenforced = 0, net_disagreements = 0;
  std::map<std::string, std::size_t> net_outcomes;
  for (const auto& name : names) {
    // The pre-built policy, plus read access to one host directory and
    // write access to two (binds outside the default root).
    nlohmann::json rules = nlohmann::json::array();
    rules.push_back({{"action", "allow"}, {"path", host_dir}, {"perms", {"read_file", "read_dir"}}});
    for (const auto& d : writable_dirs)
      rules.push_back({{"action", "allow"},
                       {"path", d},
                       {"perms",
                        {"read_file", "read_dir", "write_file", "truncate", "make_reg", "make_dir",
                         "remove_file", "remove_dir"}}});
    std::ofstream(host_dir + "/policy.json")
      << nlohmann::json{{"version", 1},
                        {"extends", {dir + "/" + name + ".json"}},
                        {"fs", {{"rules", rules}}}}
           .dump();
    reset_writable_dirs();
    auto doc = pol::load_policy(host_dir + "/policy.json", dir);
    BOOST_REQUIRE_MESSAGE(doc, name << ": " << (doc ? "" : doc.to_failure().describe()));
    auto pc = test_pool(1);
    pc.mode = exec_mode::shared;
    auto applied = apply_policy(*doc, pc);
    BOOST_REQUIRE_MESSAGE(applied, name << ": " << (applied ? "" : applied.error().describe()));
    if (pc.isolation != platform::isolation_mode::namespaces)
      continue; // no sandbox: nothing for the kernel to enforce
    pc.default_timeout_ms = 30000;
    pc.proxy = proxy;
    auto spec = make_sandbox_spec(pc.sandbox, pc.harness);
    BOOST_REQUIRE_MESSAGE(spec, name << ": " << (spec ? "" : spec.error().describe()));
    if (const uint16_t port = relay_port_of(pc); port != 0)
      add_egress_relay(*spec, port);
    auto policy = pol::compiled_policy::compile(*doc, name);
    auto pool = spawn_pool(sys, pc);
    BOOST_REQUIRE_MESSAGE(pool, name << ": " << (pool ? "" : pool.error().describe()));
    for (const auto& op : ops) {
      auto r = exec_code(*pool, code_for(op));
      std::string outcome;
      if (r.error == error_class::policy_kill)
        outcome = "policy_kill";
      else if (r.error == error_class::ok)
        outcome = r.stdout_data.substr(0, r.stdout_data.find('\n'));
      else
        outcome = std::string(to_string(r.error)) + " " + r.detail + r.stderr_data;
      ++outcomes[outcome];
      if (outcome == "ENOENT") {
        ++absent;
        continue;
      }
      const bool did = outcome == "ok";
      const bool refused = outcome == "EACCES" || outcome == "EPERM" || outcome == "EROFS" ||
                           outcome == "policy_kill";
      std::string by;
      const bool allow = explained_allow(*spec, *policy, op, by);
      ++compared;
      if ((did && allow) || (refused && !allow))
        continue;
      ++disagreements;
      BOOST_ERROR(name << ": " << op.perm << ":" << op.path << ": explain says "
                       << (allow ? "allow" : "deny") << " (by " << by << "), the sandbox answered "
                       << outcome);
    }
    // The network operations, all in one exec.
    auto r = exec_code(*pool, net_code_for(net_ops, relay));
    std::vector<std::string> answers;
    if (r.error == error_class::ok) {
      const auto j = nlohmann::json::parse(r.stdout_data, nullptr, false);
      if (j.is_array() && j.size() == net_ops.size())
        for (const auto& a : j)
          answers.push_back(a.is_string() ? a.get<std::string>() : a.dump());
    }
    BOOST_REQUIRE_MESSAGE(answers.size() == net_ops.size(),
                          name << ": the network operations gave no answer: "
                               << to_string(r.error) << " " << r.detail << r.stdout_data
                               << r.stderr_data
                               << (r.has_exception ? r.exception.type + ": " + r.exception.message
                                                   : std::string{}));
    for (std::size_t i = 0; i < net_ops.size(); ++i) {
      const auto& op = net_ops[i];
      const std::string& outcome = answers[i];
      ++net_outcomes[outcome];
      if (outcome == "nolistener") {
        ++net_apart;
        continue;
      }
      auto ip = pol::parse_ip(op.address);
      BOOST_REQUIRE(ip);
      const sandbox_net_decision d =
        decide_net_in_sandbox(*spec, *policy, op.call, op.proto, *ip, op.port);
      if (d.unenforced && classify(outcome) == net_outcome::done) {
        // What the policy denies, done where nothing can come of it
        // (docs/policies.md, Conformance): counted apart.
        ++net_unenforced;
        continue;
      }
      ++net_compared;
      const auto got = classify(outcome);
      // The sandbox may do more than the policy allows only where castellan
      // grants it itself (the relay); anything else would be a hole that
      // explain merely describes.
      const bool beyond_policy =
        d.outcome == net_outcome::done && op.call != net_call::relay &&
        policy->check_net(op.proto, *ip, op.port).verdict == pol::action::deny &&
        d.by.rfind("castellan base:", 0) != 0;
      if (got && *got == d.outcome && !beyond_policy)
        continue;
      ++net_disagreements;
      BOOST_ERROR(name << ": " << describe(op) << ": explain says " << pol::to_string(d.verdict)
                       << ", " << to_string(d.outcome) << " (by " << d.by
                       << "), the sandbox answered " << outcome
                       << (beyond_policy ? ", which the policy denies" : ""));
    }
    caf::anon_send(*pool, shutdown_atom::value);
  }
  caf::anon_send(proxy, shutdown_atom::value);
  std::ostringstream summary;
  for (const auto& [outcome, n] : outcomes)
    summary << " " << outcome << "=" << n;
  BOOST_TEST_MESSAGE("conformance: " << names.size() << " policies, " << ops.size()
                                     << " operations each: " << compared << " compared, "
                                     << absent << " on paths the sandbox lacks, "
                                     << disagreements << " disagreements;" << summary.str());
  std::ostringstream net_summary;
  for (const auto& [outcome, n] : net_outcomes)
    net_summary << " " << outcome << "=" << n;
  BOOST_TEST_MESSAGE("conformance (network): " << names.size() << " policies, " << net_ops.size()
                                               << " operations each: " << net_compared
                                               << " compared, " << net_apart
                                               << " TCP connects with no listener possible, "
                                               << net_unenforced
                                               << " denied but done without loopback, "
                                               << net_disagreements << " disagreements;"
                                               << net_summary.str());
  BOOST_TEST(disagreements == 0u);
  BOOST_TEST(compared > names.size() * 40);
  BOOST_TEST(net_disagreements == 0u);
  BOOST_TEST(net_compared > names.size() * 40);
}

BOOST_AUTO_TEST_SUITE_END()
