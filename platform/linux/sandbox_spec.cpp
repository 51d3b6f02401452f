#include "platform/linux/sandbox_spec.hpp"

#include "platform/linux/json_object_reader.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

namespace castellan::platform {

namespace {

using json = nlohmann::json;

constexpr std::size_t max_spec_bytes = 1 << 20;

// --- names of rights --------------------------------------------------------

json fs_names_json(uint64_t mask) { return landlock_fs_names(mask); }

std::optional<uint64_t> fs_alias(const std::string& name) {
  if (name == "all")
    return landlock_fs::all;
  if (name == "read_execute")
    return landlock_fs::read_execute;
  return landlock_fs_right(name);
}

// --- writing ----------------------------------------------------------------

json root_json(const root_spec& r) {
  json binds = json::array();
  for (const auto& b : r.binds)
    binds.push_back({{"source", b.source},     {"target", b.target},
                     {"writable", b.writable}, {"exec", b.exec},
                     {"optional", b.optional}, {"device", b.device},
                     {"listed", b.listed},
                     {"captured_by_spawner", b.captured_by_spawner},
                     {"source_fd", b.source_fd},
                     {"overlay", b.overlay}});
  json tmpfs = json::array();
  for (const auto& t : r.tmpfs)
    tmpfs.push_back(
      {{"target", t.target}, {"size_bytes", t.size_bytes}, {"mode", t.mode}, {"exec", t.exec}});
  json files = json::array();
  for (const auto& f : r.files)
    files.push_back({{"path", f.path}, {"content", f.content}, {"mode", f.mode}});
  json links = json::array();
  for (const auto& s : r.symlinks)
    links.push_back({{"path", s.path}, {"points_to", s.points_to}});
  return {{"staging_dir", r.staging_dir},
          {"root_size_bytes", r.root_size_bytes},
          {"read_only", r.read_only},
          {"overlay_size_bytes", r.overlay_size_bytes},
          {"binds", binds},
          {"tmpfs", tmpfs},
          {"files", files},
          {"symlinks", links},
          {"masked", r.masked},
          {"etc", {{"source", r.etc.source},
                   {"entries", r.etc.entries},
                   {"withheld", r.etc.withheld}}},
          {"proc", r.proc},
          {"proc_hide_pids", r.proc_hide_pids},
          {"proc_subset_pid", r.proc_subset_pid},
          {"minimal_dev", r.minimal_dev},
          {"dev_shm_size_bytes", r.dev_shm_size_bytes},
          {"hostname", r.hostname},
          {"workdir", r.workdir}};
}

json landlock_json(const landlock_spec& l) {
  json paths = json::array();
  for (const auto& p : l.paths)
    paths.push_back({{"path", p.path}, {"access", fs_names_json(p.access)}, {"optional", p.optional}});
  json ports = json::array();
  for (const auto& p : l.ports)
    ports.push_back({{"port", p.port}, {"access", landlock_net_names(p.access)}});
  return {{"enabled", l.enabled},
          {"best_effort", l.best_effort},
          {"handled_fs", fs_names_json(l.handled_fs)},
          {"paths", paths},
          {"handled_net", landlock_net_names(l.handled_net)},
          {"ports", ports},
          {"scoped", landlock_scope_names(l.scoped)}};
}

/// A BPF program as [[code, jt, jf, k], ...].
json program_json(const std::vector<sock_filter>& prog) {
  json out = json::array();
  for (const auto& i : prog)
    out.push_back({i.code, i.jt, i.jf, i.k});
  return out;
}

json seccomp_json(const seccomp_spec& s) {
  json j = {{"enabled", s.enabled},
            {"deny", s.deny},
            {"kill", s.kill},
            {"deny_errno", s.deny_errno}};
  if (const auto& c = s.compiled) {
    const seccomp_report& r = c->report;
    j["compiled"] = {{"rules", program_json(c->rules)},
                     {"guard", program_json(c->guard)},
                     {"report", {{"mode", r.mode},
                                 {"denied", r.denied},
                                 {"killed", r.killed},
                                 {"not_on_this_arch", r.not_on_this_arch},
                                 {"highest_allowed_nr", r.highest_allowed_nr},
                                 {"arguments", r.arguments}}}};
  }
  return j;
}

json notify_json(const notify_spec& n) {
  return {{"syscalls", n.syscalls}, {"open_writes_only", n.open_writes_only}};
}

// --- reading ----------------------------------------------------------------

void read_root(const json& j, const std::string& path, root_spec& r, std::string& err) {
  object_reader o(j, path, err);
  o.string("staging_dir", r.staging_dir);
  o.unsigned_number("root_size_bytes", r.root_size_bytes);
  o.boolean("read_only", r.read_only);
  o.unsigned_number("overlay_size_bytes", r.overlay_size_bytes);
  r.binds.clear();
  o.array("binds", [&](const json& e, const std::string& p) {
    bind_mount b;
    object_reader x(e, p, err);
    x.string("source", b.source);
    x.string("target", b.target);
    x.boolean("writable", b.writable);
    x.boolean("exec", b.exec);
    x.boolean("optional", b.optional);
    x.boolean("device", b.device);
    x.boolean("listed", b.listed);
    x.boolean("captured_by_spawner", b.captured_by_spawner);
    x.signed_number("source_fd", b.source_fd);
    x.boolean("overlay", b.overlay);
    x.finish();
    if (b.source_fd < -1)
      x.fail(p + "/source_fd", "not an fd (or -1)");
    r.binds.push_back(b);
  });
  r.tmpfs.clear();
  o.array("tmpfs", [&](const json& e, const std::string& p) {
    tmpfs_mount t;
    object_reader x(e, p, err);
    x.string("target", t.target);
    x.unsigned_number("size_bytes", t.size_bytes);
    x.unsigned_number("mode", t.mode);
    x.boolean("exec", t.exec);
    x.finish();
    if (t.mode > 07777)
      x.fail(p + "/mode", "not a file mode");
    r.tmpfs.push_back(t);
  });
  r.files.clear();
  o.array("files", [&](const json& e, const std::string& p) {
    generated_file f;
    object_reader x(e, p, err);
    x.string("path", f.path);
    x.string("content", f.content);
    x.unsigned_number("mode", f.mode);
    x.finish();
    if (f.mode > 07777)
      x.fail(p + "/mode", "not a file mode");
    r.files.push_back(f);
  });
  r.symlinks.clear();
  o.array("symlinks", [&](const json& e, const std::string& p) {
    symlink_entry s;
    object_reader x(e, p, err);
    x.string("path", s.path);
    x.string("points_to", s.points_to);
    x.finish();
    r.symlinks.push_back(s);
  });
  r.masked.clear();
  o.array("masked", [&](const json& e, const std::string& p) {
    if (!e.is_string()) {
      o.fail(p, "expected a string");
      return;
    }
    r.masked.push_back(e.get<std::string>());
  });
  if (const auto* etc = o.object("etc")) {
    object_reader x(*etc, path + "/etc", err);
    x.string("source", r.etc.source);
    x.unsigned_number("entries", r.etc.entries);
    x.strings("withheld", r.etc.withheld);
    x.finish();
  }
  o.boolean("proc", r.proc);
  o.boolean("proc_hide_pids", r.proc_hide_pids);
  o.boolean("proc_subset_pid", r.proc_subset_pid);
  o.boolean("minimal_dev", r.minimal_dev);
  o.unsigned_number("dev_shm_size_bytes", r.dev_shm_size_bytes);
  o.string("hostname", r.hostname);
  o.string("workdir", r.workdir);
  o.finish();
}

void read_landlock(const json& j, const std::string& path, landlock_spec& l, std::string& err) {
  object_reader o(j, path, err);
  o.boolean("enabled", l.enabled);
  o.boolean("best_effort", l.best_effort);
  o.rights("handled_fs", l.handled_fs, fs_alias);
  l.paths.clear();
  o.array("paths", [&](const json& e, const std::string& p) {
    landlock_path_rule rule;
    object_reader x(e, p, err);
    x.string("path", rule.path);
    x.rights("access", rule.access, fs_alias);
    x.boolean("optional", rule.optional);
    x.finish();
    if (err.empty() && (rule.path.empty() || rule.path.front() != '/'))
      x.fail(p + "/path", "expected an absolute path");
    l.paths.push_back(rule);
  });
  o.rights("handled_net", l.handled_net, landlock_net_right);
  l.ports.clear();
  o.array("ports", [&](const json& e, const std::string& p) {
    landlock_port_rule rule;
    object_reader x(e, p, err);
    x.unsigned_number("port", rule.port);
    x.rights("access", rule.access, landlock_net_right);
    x.finish();
    l.ports.push_back(rule);
  });
  o.rights("scoped", l.scoped, landlock_scope_bit);
  o.finish();
}

/// A BPF program written by program_json: 1..BPF_MAXINSNS instructions of
/// four numbers in range (the kernel verifies the program itself).
void read_program(const json& j, const std::string& path, std::vector<sock_filter>& prog,
                  std::string& err) {
  if (!j.is_array() || j.empty() || j.size() > BPF_MAXINSNS) {
    err = path + ": expected an array of 1.." + std::to_string(BPF_MAXINSNS) + " instructions";
    return;
  }
  prog.clear();
  for (std::size_t i = 0; i < j.size(); ++i) {
    const json& insn = j[i];
    const uint64_t limits[] = {0xffff, 0xff, 0xff, 0xffffffff};
    bool ok = insn.is_array() && insn.size() == 4;
    for (std::size_t f = 0; ok && f < 4; ++f)
      ok = insn[f].is_number_unsigned() && insn[f].get<uint64_t>() <= limits[f];
    if (!ok) {
      err = path + "/" + std::to_string(i) + ": expected [code, jt, jf, k] in range";
      return;
    }
    prog.push_back({static_cast<uint16_t>(insn[0].get<uint64_t>()),
                    static_cast<uint8_t>(insn[1].get<uint64_t>()),
                    static_cast<uint8_t>(insn[2].get<uint64_t>()),
                    static_cast<uint32_t>(insn[3].get<uint64_t>())});
  }
}

void read_compiled_seccomp(const json& j, const std::string& path, compiled_seccomp& c,
                           std::string& err) {
  object_reader o(j, path, err);
  if (const json* v = o.array_value("rules"); v && err.empty())
    read_program(*v, path + "/rules", c.rules, err);
  if (const json* v = o.array_value("guard"); v && err.empty())
    read_program(*v, path + "/guard", c.guard, err);
  if (const json* r = o.object("report")) {
    object_reader x(*r, path + "/report", err);
    x.string("mode", c.report.mode);
    x.strings("denied", c.report.denied);
    x.strings("killed", c.report.killed);
    x.strings("not_on_this_arch", c.report.not_on_this_arch);
    x.signed_number("highest_allowed_nr", c.report.highest_allowed_nr);
    x.string("arguments", c.report.arguments);
    x.finish();
  }
  o.finish();
  if (err.empty() && (c.rules.empty() || c.guard.empty()))
    o.fail(path, "expected both programs, rules and guard");
}

void read_seccomp(const json& j, const std::string& path, seccomp_spec& s, std::string& err) {
  object_reader o(j, path, err);
  o.boolean("enabled", s.enabled);
  o.strings("deny", s.deny);
  o.strings("kill", s.kill);
  o.signed_number("deny_errno", s.deny_errno);
  if (const json* c = o.object("compiled")) {
    auto compiled = std::make_shared<compiled_seccomp>();
    read_compiled_seccomp(*c, path + "/compiled", *compiled, err);
    s.compiled = std::move(compiled);
  }
  o.finish();
  if (err.empty() && (s.deny_errno <= 0 || s.deny_errno > 4095))
    o.fail(path + "/deny_errno", "not an errno value (1..4095)");
}

void read_notify(const json& j, const std::string& path, notify_spec& n, std::string& err) {
  object_reader o(j, path, err);
  o.strings("syscalls", n.syscalls);
  o.boolean("open_writes_only", n.open_writes_only);
  o.finish();
}

} // namespace

std::string to_json(const sandbox_spec& spec) {
  json j = {{"version", sandbox_spec::current_version},
            {"root", root_json(spec.root)},
            {"landlock", landlock_json(spec.landlock)},
            {"seccomp", seccomp_json(spec.seccomp)},
            {"notify", notify_json(spec.notify)},
            {"memfd_noexec",
             {{"required", spec.memfd_noexec.required},
              {"best_effort", spec.memfd_noexec.best_effort}}},
            {"loopback_up", spec.loopback_up},
            {"drop_capabilities", spec.drop_capabilities},
            {"egress_port", spec.egress_port},
            {"egress_fd", spec.egress_fd}};
  return j.dump();
}

outcome<sandbox_spec> parse_sandbox_spec(std::string_view text) {
  const json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded())
    return logic_failure("sandbox spec: not valid JSON");
  std::string err;
  sandbox_spec spec;
  object_reader o(j, "", err);
  int version = 0;
  o.signed_number("version", version);
  if (err.empty() && version != sandbox_spec::current_version)
    o.fail("/version", "expected " + std::to_string(sandbox_spec::current_version) + ", got " +
                         std::to_string(version));
  if (const json* r = o.object("root"))
    read_root(*r, "/root", spec.root, err);
  if (const json* l = o.object("landlock"))
    read_landlock(*l, "/landlock", spec.landlock, err);
  if (const json* s = o.object("seccomp"))
    read_seccomp(*s, "/seccomp", spec.seccomp, err);
  if (const json* n = o.object("notify"))
    read_notify(*n, "/notify", spec.notify, err);
  if (const json* m = o.object("memfd_noexec")) {
    object_reader x(*m, "/memfd_noexec", err);
    x.boolean("required", spec.memfd_noexec.required);
    x.boolean("best_effort", spec.memfd_noexec.best_effort);
    x.finish();
  }
  o.boolean("loopback_up", spec.loopback_up);
  o.boolean("drop_capabilities", spec.drop_capabilities);
  o.unsigned_number("egress_port", spec.egress_port);
  o.signed_number("egress_fd", spec.egress_fd);
  o.finish();
  if (err.empty() && spec.egress_port != 0 && spec.egress_fd < 3)
    return logic_failure("sandbox spec: /egress_fd: " + std::to_string(spec.egress_fd) +
                         " is not an inherited fd (the egress relay needs one >= 3)");
  if (!err.empty())
    return logic_failure("sandbox spec: " + err);
  if (auto r = validate(spec.root); !r)
    return r.error().wrap("sandbox spec: /root");
  return spec;
}

outcome<unique_fd> seal_sandbox_spec(const sandbox_spec& spec) {
  std::string text;
  try {
    text = to_json(spec);
  } catch (const json::type_error& e) {
    // A path of an embedding program's config that is not UTF-8: JSON
    // cannot carry it, and a mangled path could drop a mask.
    return logic_failure(std::string("sandbox spec: a path or name is not UTF-8: ") + e.what());
  }
  if (text.size() > max_spec_bytes)
    return logic_failure("sandbox spec: " + std::to_string(text.size()) +
                         " bytes, more than the limit of " + std::to_string(max_spec_bytes));
  unique_fd fd(::memfd_create("castellan-sandbox-spec", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd)
    return errno_failure("sandbox spec: memfd_create");
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return errno_failure("sandbox spec: write memfd");
    done += static_cast<std::size_t>(n);
  }
  if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0)
    return errno_failure("sandbox spec: seal memfd");
  return fd;
}

outcome<sandbox_spec> read_sandbox_spec(int fd) {
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0)
    return errno_failure("sandbox spec: F_GET_SEALS on fd " + std::to_string(fd) +
                         " (not a memfd?)");
  const int needed = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;
  if ((seals & needed) != needed)
    return logic_failure("sandbox spec: fd " + std::to_string(fd) +
                         " is not sealed against writes (seals " + std::to_string(seals) + ")");
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return errno_failure("sandbox spec: fstat fd " + std::to_string(fd));
  if (st.st_size < 0 || static_cast<uint64_t>(st.st_size) > max_spec_bytes)
    return logic_failure("sandbox spec: " + std::to_string(st.st_size) + " bytes, more than " +
                         std::to_string(max_spec_bytes));
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n =
      ::pread(fd, text.data() + done, text.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return errno_failure("sandbox spec: pread fd " + std::to_string(fd), n == 0 ? EIO : errno);
    done += static_cast<std::size_t>(n);
  }
  return parse_sandbox_spec(text);
}

landlock_spec default_landlock_spec(const root_spec& root) {
  landlock_spec l;
  const uint64_t device_rights = landlock_fs::read_file | landlock_fs::write_file;
  for (const auto& b : root.binds) {
    uint64_t access = b.writable ? landlock_fs::read_write : landlock_fs::read_execute;
    if (b.device)
      access = device_rights;
    else if (!b.exec)
      access &= ~landlock_fs::execute;
    l.paths.push_back({b.target, access, b.optional});
  }
  for (const auto& t : root.tmpfs) {
    uint64_t access = landlock_fs::read_write;
    if (!t.exec)
      access &= ~landlock_fs::execute;
    l.paths.push_back({t.target, access, false});
  }
  if (!root.files.empty())
    l.paths.push_back({"/etc", landlock_fs::read_file | landlock_fs::read_dir, true});
  if (root.proc)
    l.paths.push_back({"/proc", landlock_fs::read_file | landlock_fs::read_dir, false});
  if (root.minimal_dev) {
    for (const char* n : {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"})
      l.paths.push_back({n, device_rights, false});
    if (root.dev_shm_size_bytes != 0)
      l.paths.push_back({"/dev/shm", landlock_fs::read_write & ~landlock_fs::execute, false});
  }
  return l;
}

sandbox_spec default_sandbox_spec(const default_root_options& options) {
  sandbox_spec spec;
  spec.root = default_root_spec(options);
  spec.landlock = default_landlock_spec(spec.root);
  return spec;
}

} // namespace castellan::platform
