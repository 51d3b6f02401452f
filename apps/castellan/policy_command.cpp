/// @file policy_command.cpp
/// `castellan policy check|merge|explain|init`: validate, combine, query and
/// scaffold policy files with the same engine the daemon uses.

#include <sys/stat.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "actors/policy/engine/compiled_policy.hpp"
#include "actors/policy/engine/fs_access.hpp"
#include "actors/policy/engine/json_format.hpp"
#include "actors/policy/engine/merge.hpp"
#include "actors/policy/engine/policy_directory.hpp"
#include "actors/policy/engine/policy_loader.hpp"
#include "actors/policy/engine/policy_parser.hpp"
#include "apps/castellan/cli_context.hpp"
#include "actors/pool/pool_actor.hpp"
#include "actors/pool/sandbox_fs_rights.hpp"
#include "actors/pool/sandbox_net_rights.hpp"
#include "platform/linux/host_permissions.hpp"
#include "actors/pool/pool_policy.hpp"
#include "actors/pool/sandbox_profile.hpp"
#include "platform/install_layout.hpp"

namespace castellan::cli {

namespace {

namespace pol = castellan::policy;

/// Options shared by the policy subcommands that read files.
struct policy_args {
  std::vector<std::string> files;
  std::string policy_dir; ///< where `extends` names resolve; default: each file's directory
  std::vector<std::string> fs_queries;
  std::vector<std::string> net_queries;
  std::vector<std::string> exec_queries;
  bool verbose = false;
  std::vector<std::string> allow_read;
  std::vector<std::string> allow_write;
  std::vector<std::string> allow_net;
  std::vector<std::string> allow_exec;
  bool bare = false;
};

void print_errors(const std::vector<pol::policy_error>& errors) {
  for (const auto& e : errors)
    std::cerr << e.describe() << '\n';
}

/// Loads a policy file, or a pre-built policy by name (`strict`) when no
/// file of that name exists here.
pol::validated<pol::policy_document> load(const std::string& argument, const std::string& dir) {
  std::string file = argument;
  struct stat st;
  if (::stat(argument.c_str(), &st) != 0)
    if (auto layout = platform::find_install_layout())
      file = platform::resolve_policy_argument(*layout, argument);
  return pol::load_policy(file, dir.empty() ? pol::parent_directory(file) : dir);
}

// The sandbox a pool builds from `doc` (none when the policy runs without one).
// A supervisor's pools always have the egress proxy, so a policy that allows
// network gets the relay.
std::optional<platform::sandbox_spec> sandbox_of(const pol::policy_document& doc) {
  pool_config pc;
  if (auto layout = platform::find_install_layout())
    pc.harness = layout->harness;
  else
    pc.harness = std::string(sandbox_harness_dir) + "/castellan_harness.py";
  if (!apply_policy(doc, pc) || pc.isolation != platform::isolation_mode::namespaces)
    return std::nullopt;
  auto spec = make_sandbox_spec(pc.sandbox, pc.harness);
  if (!spec)
    return std::nullopt;
  if (pc.egress_policy && pc.egress_port != 0)
    add_egress_relay(*spec, pc.egress_port);
  return std::move(*spec);
}

// -- check -----------------------------------------------------------------------

// True for the policy schema itself (policies/schema.json), which sits beside
// the policies, so that `policy check policies/*.json` does what it says.
bool is_schema_file(const std::string& path) {
  if (pol::policy_name_of(path) != "schema")
    return false;
  std::ifstream in{path};
  std::stringstream text;
  text << in.rdbuf();
  const auto j = nlohmann::json::parse(text.str(), nullptr, false);
  return j.is_object() && j.contains("$schema") && j["$schema"].is_string() &&
         j["$schema"].get<std::string>().find("json-schema.org") != std::string::npos;
}

// The files to check: FILE arguments as given, directories expanded to their
// policy files.
std::vector<std::string> expand(const std::vector<std::string>& args, bool& ok) {
  std::vector<std::string> out;
  for (const auto& a : args) {
    struct stat st {};
    if (::stat(a.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      auto files = pol::list_policy_files(a);
      if (!files) {
        std::cerr << files.error().describe() << '\n';
        ok = false;
        continue;
      }
      out.insert(out.end(), files->begin(), files->end());
    } else {
      out.push_back(a);
    }
  }
  return out;
}

void run_check(const policy_args& a, cli_context& ctx) {
  size_t bad = 0;
  bool ok = true;
  const auto files = expand(a.files, ok);
  for (const auto& f : files) {
    if (is_schema_file(f)) {
      std::cout << f << ": skipped (the policy JSON Schema, not a policy)\n";
      continue;
    }
    auto doc = load(f, a.policy_dir);
    if (doc) {
      // Valid; but a bind it makes writable may still be one the host's
      // owner and mode bits keep the sandbox's code from writing.
      std::vector<std::string> warnings;
      if (auto sandbox = sandbox_of(*doc))
        if (auto ids = platform::default_sandbox_host_ids())
          warnings = platform::unwritable_binds(sandbox->root, *ids);
      std::cout << f << ": ok";
      if (!warnings.empty())
        std::cout << ", " << warnings.size() << (warnings.size() == 1 ? " warning" : " warnings");
      std::cout << '\n';
      for (const auto& w : warnings)
        std::cout << f << ": warning: " << w << '\n';
      continue;
    }
    ++bad;
    print_errors(doc.errors());
  }
  if (bad != 0 || !ok) {
    std::cerr << bad << " of " << files.size() << " policies invalid\n";
    ctx.exit_code = 1;
  }
}

// -- merge -----------------------------------------------------------------------

void run_merge(const policy_args& a, cli_context& ctx) {
  std::vector<pol::policy_document> layers;
  bool ok = true;
  for (const auto& f : a.files) {
    auto doc = load(f, a.policy_dir);
    if (!doc) {
      print_errors(doc.errors());
      ok = false;
      continue;
    }
    layers.push_back(std::move(*doc));
  }
  if (!ok) {
    ctx.exit_code = 1;
    return;
  }
  std::cout << pol::format_json(pol::to_json(pol::merge_policies(layers))) << '\n';
}

// -- explain ---------------------------------------------------------------------

// "PERM[,PERM…]:PATH"
bool parse_fs_query(const std::string& q, pol::fs_access& mask, std::string& path) {
  const auto colon = q.find(':');
  if (colon == std::string::npos)
    return false;
  mask = 0;
  std::string perms = q.substr(0, colon);
  size_t start = 0;
  while (start <= perms.size()) {
    auto comma = perms.find(',', start);
    if (comma == std::string::npos)
      comma = perms.size();
    auto m = pol::parse_fs_perm(perms.substr(start, comma - start));
    if (!m)
      return false;
    mask |= *m;
    start = comma + 1;
  }
  path = q.substr(colon + 1);
  return !path.empty();
}

// "[CALL:]PROTO:ADDR:PORT[:HOST]", with "[v6]" for IPv6 addresses; CALL is
// connect, bind or relay (default: reach).
bool parse_net_query(const std::string& q, net_call& call, pol::net_proto& proto,
                     pol::ip_address& addr, uint16_t& port, std::string& host) {
  std::size_t start = 0;
  call = net_call::reach;
  for (net_call c : {net_call::connect, net_call::bind, net_call::relay}) {
    const std::string prefix = std::string(to_string(c)) + ":";
    if (q.compare(0, prefix.size(), prefix) == 0) {
      call = c;
      start = prefix.size();
    }
  }
  const auto c1 = q.find(':', start);
  if (c1 == std::string::npos)
    return false;
  auto p = pol::parse_net_proto(q.substr(start, c1 - start));
  if (!p)
    return false;
  proto = *p;
  std::string rest = q.substr(c1 + 1);
  std::string addr_text;
  if (!rest.empty() && rest.front() == '[') {
    const auto close = rest.find(']');
    if (close == std::string::npos || close + 1 >= rest.size() || rest[close + 1] != ':')
      return false;
    addr_text = rest.substr(1, close - 1);
    rest = rest.substr(close + 2);
  } else {
    const auto c2 = rest.find(':');
    if (c2 == std::string::npos)
      return false;
    addr_text = rest.substr(0, c2);
    rest = rest.substr(c2 + 1);
  }
  auto a = pol::parse_ip(addr_text);
  if (!a)
    return false;
  addr = *a;
  const auto c3 = rest.find(':');
  const std::string port_text = rest.substr(0, c3);
  host = c3 == std::string::npos ? std::string{} : rest.substr(c3 + 1);
  if (port_text.empty() || port_text.size() > 5)
    return false;
  unsigned long value = 0;
  for (char c : port_text) {
    if (c < '0' || c > '9')
      return false;
    value = value * 10 + static_cast<unsigned long>(c - '0');
  }
  if (value > 65535)
    return false;
  port = static_cast<uint16_t>(value);
  return true;
}

// "PATH" or "PATH:SHA256" (64 hex digits after the last colon).
void parse_exec_query(const std::string& q, std::string& path, std::string& sha) {
  const auto colon = q.rfind(':');
  if (colon != std::string::npos && q.size() - colon - 1 == 64) {
    path = q.substr(0, colon);
    sha = q.substr(colon + 1);
    return;
  }
  path = q;
  sha.clear();
}

std::string origin_of(const pol::policy_document& doc, const pol::decision& d) {
  if (d.source != pol::decision_source::rule || d.index < 0)
    return {};
  const auto i = static_cast<size_t>(d.index);
  if (d.pointer.rfind("/fs/", 0) == 0 && i < doc.fs_rules.size())
    return doc.fs_rules[i].origin;
  if (d.pointer.rfind("/net/", 0) == 0 && i < doc.net_rules.size())
    return doc.net_rules[i].origin;
  if (d.pointer.rfind("/exec/", 0) == 0 && i < doc.exec_rules.size())
    return doc.exec_rules[i].origin;
  return {};
}

void run_explain(const policy_args& a, const CLI::App& sub, cli_context& ctx) {
  if (a.files.size() != 1) {
    std::cerr << "policy explain: exactly one FILE\n";
    ctx.exit_code = usage_exit_code;
    return;
  }
  auto doc = load(a.files.front(), a.policy_dir);
  if (!doc) {
    print_errors(doc.errors());
    ctx.exit_code = 1;
    return;
  }
  auto policy =
      pol::compiled_policy::compile(std::move(*doc), pol::policy_name_of(a.files.front()));
  // fs and net queries are answered for the sandbox a pool builds from this
  // policy: the same Landlock rules, mediation and relay its workers get
  // (sandbox_fs_rights.hpp, sandbox_net_rights.hpp).
  const std::optional<platform::sandbox_spec> sandbox = sandbox_of(policy->document());
  // Answer in command-line order: walk the options as CLI11 parsed them.
  size_t next_fs = 0;
  size_t next_net = 0;
  size_t next_exec = 0;
  for (const CLI::Option* opt : sub.parse_order()) {
    std::string kind;
    std::string q;
    pol::decision d;
    if (opt->get_name() == "--fs" && next_fs < a.fs_queries.size()) {
      q = a.fs_queries[next_fs++];
      kind = "fs";
      pol::fs_access mask = 0;
      std::string path;
      if (!parse_fs_query(q, mask, path)) {
        std::cerr << "policy explain: --fs wants PERM[,PERM…]:PATH, got '" << q
                  << "' (permissions: " << pol::fs_perm_vocabulary() << ")\n";
        ctx.exit_code = usage_exit_code;
        return;
      }
      d = policy->check_fs(path, mask);
      if (sandbox) {
        const sandbox_decision sd = decide_in_sandbox(*sandbox, *policy, path, mask);
        if (sd.by != d.pointer) {
          // The sandbox decides otherwise than the policy alone would.
          std::cout << pol::to_string(sd.verdict) << ' ' << kind << ' ' << q << " by " << sd.by
                    << '\n';
          continue;
        }
      }
    } else if (opt->get_name() == "--net" && next_net < a.net_queries.size()) {
      q = a.net_queries[next_net++];
      kind = "net";
      net_call call = net_call::reach;
      pol::net_proto proto = pol::net_proto::tcp;
      pol::ip_address addr;
      uint16_t port = 0;
      std::string host;
      if (!parse_net_query(q, call, proto, addr, port, host)) {
        std::cerr << "policy explain: --net wants [connect:|bind:|relay:]PROTO:ADDR:PORT[:HOST] "
                     "(IPv6 as [ADDR]), got '"
                  << q << "'\n";
        ctx.exit_code = usage_exit_code;
        return;
      }
      d = policy->check_net(proto, addr, port, host);
      if (sandbox) {
        const sandbox_net_decision sd =
          decide_net_in_sandbox(*sandbox, *policy, call, proto, addr, port, host);
        if (sd.by != d.pointer || sd.verdict != d.verdict) {
          std::cout << pol::to_string(sd.verdict) << ' ' << kind << ' ' << q << " by " << sd.by
                    << '\n';
          continue;
        }
      }
    } else if (opt->get_name() == "--exec" && next_exec < a.exec_queries.size()) {
      q = a.exec_queries[next_exec++];
      kind = "exec";
      std::string path;
      std::string sha;
      parse_exec_query(q, path, sha);
      d = policy->check_exec(path, sha);
    } else {
      continue;
    }
    std::cout << pol::to_string(d.verdict) << ' ' << kind << ' ' << q << " by " << d.pointer;
    if (a.verbose) {
      const std::string origin = origin_of(policy->document(), d);
      if (!origin.empty())
        std::cout << " (" << origin << ")";
    }
    std::cout << '\n';
  }
}

// -- init ------------------------------------------------------------------------

void run_init(const policy_args& a, cli_context& ctx) {
  // Validate the flags with the same checks as a policy file, then build the
  // JSON and check the result itself before printing it.
  using ojson = nlohmann::ordered_json;
  ojson fs_rules = ojson::array();
  auto fs_rule = [&](const std::string& path, std::vector<std::string> perms) {
    ojson r = ojson::object();
    r["action"] = "allow";
    r["path"] = path;
    r["perms"] = std::move(perms);
    fs_rules.push_back(std::move(r));
  };
  if (!a.bare) {
    for (const char* dir : {"/usr", "/lib", "/lib64"})
      fs_rule(dir, {"read_file", "read_dir", "execute"});
    fs_rule("/etc/ld.so.cache", {"read_file"});
    fs_rule("/etc/localtime", {"read_file"});
    fs_rule("/etc/python3*", {"read_file", "read_dir"});
    fs_rule("/dev/null", {"read_file", "write_file"});
    fs_rule("/dev/urandom", {"read_file"});
  }
  for (const auto& p : a.allow_read)
    fs_rule(p, {"read_file", "read_dir"});
  for (const auto& p : a.allow_write)
    fs_rule(p, {"read_file", "read_dir", "write_file", "write_dir", "truncate", "refer"});
  ojson exec_rules = ojson::array();
  auto exec_rule = [&](const std::string& path) {
    ojson r = ojson::object();
    r["action"] = "allow";
    r["path"] = path;
    exec_rules.push_back(std::move(r));
  };
  if (!a.bare) {
    exec_rule("/usr/bin/python3");
    exec_rule("/usr/bin/python3.*");
  }
  for (const auto& p : a.allow_exec)
    exec_rule(p);

  ojson doc = ojson::object();
  doc["version"] = 1;
  doc["description"] = "Generated by castellan policy init: deny by default, allow what the "
                       "flags name.";
  doc["plugins"] = {{"namespaces", true}, {"landlock", true}, {"seccomp", true}};
  doc["defaults"] = {{"fs", "deny"}, {"net", "deny"}, {"exec", "deny"}};
  if (!fs_rules.empty())
    doc["fs"]["rules"] = std::move(fs_rules);
  if (!a.allow_net.empty()) {
    // A host allow list lets named connections through; addresses of private
    // networks stay denied even when an allowed name resolves to one.
    ojson rules = ojson::array();
    for (const char* cidr : {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16",
                             "127.0.0.0/8", "fc00::/7", "fe80::/10", "::1/128"})
      for (const char* proto : {"tcp", "udp"})
        rules.push_back(
            {{"action", "deny"}, {"proto", proto}, {"cidr", cidr}, {"ports", "0-65535"}});
    doc["net"]["rules"] = std::move(rules);
    doc["net"]["hosts"]["allow"] = a.allow_net;
  }
  if (!exec_rules.empty())
    doc["exec"]["rules"] = std::move(exec_rules);
  const std::string text = pol::format_json(doc);
  auto checked = pol::parse_policy(text, "<policy init>");
  if (!checked) {
    // A flag named something no policy may contain (a relative path, a bad host).
    print_errors(checked.errors());
    ctx.exit_code = usage_exit_code;
    return;
  }
  std::cout << text << '\n';
}

} // namespace

void add_policy_commands(CLI::App& app, cli_context& ctx) {
  auto args = std::make_shared<policy_args>();
  CLI::App* policy = app.add_subcommand("policy", "Check, merge, explain and create policies");
  policy->require_subcommand(1);

  CLI::App* check = policy->add_subcommand(
      "check", "Validate policy files (schema and semantic checks, extends resolved)");
  check->add_option("files", args->files, "Policy files, or directories of them")->required();
  check->add_option("--policy-dir", args->policy_dir,
                    "Where extends names resolve (default: each file's directory)");
  check->callback([args, &ctx] { run_check(*args, ctx); });

  CLI::App* merge = policy->add_subcommand(
      "merge", "Print the policy that merging the files gives (first file lowest)");
  merge->add_option("files", args->files, "Policy files")->required();
  merge->add_option("--policy-dir", args->policy_dir,
                    "Where extends names resolve (default: each file's directory)");
  merge->callback([args, &ctx] { run_merge(*args, ctx); });

  CLI::App* explain = policy->add_subcommand(
      "explain", "Decide queries against a policy and name the deciding rule");
  explain->add_option("file", args->files, "Policy file")->required()->expected(1);
  explain->add_option("--policy-dir", args->policy_dir,
                      "Where extends names resolve (default: the file's directory)");
  explain->add_option("--fs", args->fs_queries, "PERM[,PERM…]:PATH")->allow_extra_args(false);
  explain->add_option("--net", args->net_queries,
                      "[connect:|bind:|relay:]PROTO:ADDR:PORT[:HOST] (IPv6: [ADDR])")
      ->allow_extra_args(false);
  explain->add_option("--exec", args->exec_queries, "PATH[:SHA256]")->allow_extra_args(false);
  explain->add_flag("-v,--verbose", args->verbose, "Also name the file and rule of origin");
  explain->callback([args, explain, &ctx] { run_explain(*args, *explain, ctx); });

  CLI::App* init = policy->add_subcommand(
      "init", "Print a new policy: deny by default, allow what the flags name");
  init->add_option("--allow-read", args->allow_read, "Readable paths")->delimiter(',');
  init->add_option("--allow-write", args->allow_write, "Writable paths")->delimiter(',');
  init->add_option("--allow-net", args->allow_net, "Reachable hosts (example.com, *.github.com)")
      ->delimiter(',');
  init->add_option("--allow-exec", args->allow_exec, "Executable paths")->delimiter(',');
  init->add_flag("--bare", args->bare, "Leave out the rules the Python interpreter needs to start");
  init->callback([args, &ctx] { run_init(*args, ctx); });
}

} // namespace castellan::cli
