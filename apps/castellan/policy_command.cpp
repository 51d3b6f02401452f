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
#include "actors/pool/policy_explainer.hpp"
#include "apps/castellan/cli_context.hpp"
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
      const std::vector<std::string> warnings = policy_warnings(*doc);
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
  const policy_explainer explainer(
      pol::compiled_policy::compile(std::move(*doc), pol::policy_name_of(a.files.front())));
  // Answer in command-line order: walk the options as CLI11 parsed them.
  size_t next_fs = 0;
  size_t next_net = 0;
  size_t next_exec = 0;
  for (const CLI::Option* opt : sub.parse_order()) {
    explain_kind kind;
    std::string q;
    if (opt->get_name() == "--fs" && next_fs < a.fs_queries.size()) {
      kind = explain_kind::fs;
      q = a.fs_queries[next_fs++];
    } else if (opt->get_name() == "--net" && next_net < a.net_queries.size()) {
      kind = explain_kind::net;
      q = a.net_queries[next_net++];
    } else if (opt->get_name() == "--exec" && next_exec < a.exec_queries.size()) {
      kind = explain_kind::exec;
      q = a.exec_queries[next_exec++];
    } else {
      continue;
    }
    auto e = explainer.explain(kind, q);
    if (!e) {
      std::cerr << "policy explain: --" << to_string(kind) << ' ' << e.error().describe() << '\n';
      ctx.exit_code = usage_exit_code;
      return;
    }
    std::cout << pol::to_string(e->verdict) << ' ' << to_string(kind) << ' ' << q << " by "
              << e->by;
    if (a.verbose && !e->origin.empty())
      std::cout << " (" << e->origin << ")";
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
