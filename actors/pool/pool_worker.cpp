#include "actors/pool/pool_worker.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/pool/pool_actor.hpp"
#include "actors/pool/sandbox_net_rights.hpp"
#include "actors/pool/sandbox_profile.hpp"
#include "platform/linux/cgroup_subtree.hpp"
#include "platform/linux/enforcement_report.hpp"
#include "platform/linux/file_io.hpp"
#include "platform/linux/pidfd.hpp"
#include "platform/linux/sandbox_spec.hpp"
#include "platform/linux/seccomp_notify.hpp"
#include "platform/linux/worker_kill.hpp"
#include "platform/linux/worker_launcher.hpp"
#include "platform/spawn_worker.hpp"

namespace castellan {

namespace {

// The fd numbers castellan-worker finds its channel on.
constexpr int segment_child_fd = 3;
constexpr int to_worker_child_fd = 4;
constexpr int to_supervisor_child_fd = 5;
constexpr int sandbox_spec_child_fd = 6;
constexpr int egress_child_fd = 7;
constexpr int control_child_fd = 8;
constexpr int status_child_fd = 9;
/// The binds the supervisor captures for the worker (capture_bind_sources)
/// come at 10, 11, …
constexpr int first_bind_child_fd = 10;

/// The layer behind castellan-worker's code for a sandbox layer it could
/// not apply (worker/sandbox_setup.hpp), as PID 1 reports it on the status
/// pipe; null for another start-up failure.
const char* sandbox_layer_of(int code) {
  switch (code) {
    case 3:
      return "the sandbox spec could not be read";
    case 4:
      return "the root file system could not be built";
    case 5:
      return "the loopback interface or the egress relay could not be set up";
    case 6:
      return "capabilities could not be dropped";
    case 7:
      return "Landlock could not be applied";
    case 8:
      return "the seccomp filter could not be loaded";
    case 9:
      return "the seccomp notify filter could not be loaded or handed over";
    case 10:
      return "executable memfds could not be refused (vm.memfd_noexec)";
    default:
      return nullptr;
  }
}

/// What PID 1 reported on the status pipe before it exited, as the pool
/// words it: " (sandbox: <layer>)" for a layer, " (start-up failed: …)" for
/// another failure of its own start-up, "" when it reported nothing (the
/// harness ran: how it ended is the code's business, not a layer's).
std::string status_note(int fd) {
  if (fd < 0)
    return {};
  char buf[2048];
  std::size_t got = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buf + got, sizeof buf - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    got += static_cast<std::size_t>(n);
    if (got == sizeof buf)
      break;
  }
  std::string_view text(buf, got);
  const auto eol = text.find('\n');
  if (eol == std::string_view::npos)
    return {}; // nothing, or not a whole record
  text = text.substr(0, eol);
  const auto space = text.find(' ');
  const auto code = platform::parse_u64(text.substr(0, space));
  if (!code || space == std::string_view::npos)
    return {};
  const std::string what(text.substr(space + 1));
  if (const char* layer = sandbox_layer_of(static_cast<int>(*code)))
    return std::string(" (sandbox: ") + layer + ")";
  return " (start-up failed: " + what + ")";
}

/// This supervisor's cgroup subtree (cgroup_subtree.hpp), made once per
/// process when the first worker needs a cgroup, after reclaiming the
/// subtrees that supervisors killed before they could remove theirs left
/// below the same cgroups. Removed at exit by its destructor.
const outcome<platform::cgroup_subtree>& cgroup_subtree_once() {
  static const outcome<platform::cgroup_subtree> subtree =
    []() -> outcome<platform::cgroup_subtree> {
    auto layout = platform::cgroup_layout::detect();
    if (!layout)
      return layout.error();
    auto self = platform::supervisor_id::self();
    if (!self)
      return self.error();
    if (auto r = platform::reclaim_dead_subtrees(*layout, *self)) {
      for (const auto& name : r->reclaimed)
        spdlog::info("cgroups: reclaimed the subtree of gone supervisor {}", name);
      if (r->tasks_killed != 0)
        spdlog::info("cgroups: killed {} task(s) left in them", r->tasks_killed);
      for (const auto& why : r->failed)
        spdlog::warn("cgroups: could not reclaim {}", why);
    } else {
      spdlog::warn("cgroups: no reclaim of gone supervisors' subtrees: {}",
                   r.error().describe());
    }
    return platform::cgroup_subtree::create(*layout, *self);
  }();
  return subtree;
}

/// A fresh cgroup for one worker, in this supervisor's subtree.
outcome<platform::worker_cgroup> create_worker_cgroup(const platform::cgroup_limits& limits) {
  const auto& subtree = cgroup_subtree_once();
  if (!subtree)
    return subtree.error().wrap("cgroups");
  return platform::worker_cgroup::create(
    subtree->layout(), platform::worker_cgroup::unique_name("castellan-w"), limits);
}

unique_fd open_cgroup_file(const std::string& dir, const char* name, int flags) {
  if (dir.empty())
    return unique_fd{};
  return unique_fd{::open((dir + "/" + name).c_str(), flags | O_CLOEXEC)};
}

/// A value of a cgroup file read through a kept fd: the whole file as a
/// number (`key` null), or the value of the line "key N".
std::optional<uint64_t> read_cgroup_value(int fd, const char* key) noexcept {
  if (fd < 0)
    return std::nullopt;
  char buf[1024];
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0)
    return std::nullopt;
  const std::string_view text(buf, static_cast<std::size_t>(n));
  return key == nullptr ? platform::parse_u64(text) : platform::keyed_value(text, key);
}

} // namespace

pool_worker::pool_worker(uint64_t id, ipc::segment seg, ipc::doorbell to_worker,
                               ipc::doorbell to_supervisor)
  : id_(id),
    segment_(std::move(seg)),
    to_worker_(std::move(to_worker)),
    to_supervisor_(std::move(to_supervisor)),
    writer_(segment_, ipc::direction::to_worker),
    reader_(segment_, ipc::direction::to_supervisor) {}

namespace {

/// What every worker's environment starts from (a launcher's too: its
/// interpreter reads the locale from it).
std::vector<std::string> worker_environment() {
  return {"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/tmp"};
}

/// The worker's `--mode`: the harness names its mechanisms (an isolated pool's
/// execs run in children of a zygote it forks, a shared pool's in the
/// interpreter itself, a session's there too, in one __main__).
const char* harness_mode_for(exec_mode mode) noexcept {
  switch (mode) {
    case exec_mode::isolated:
      return "fork";
    case exec_mode::shared:
      return "reuse";
    case exec_mode::session:
      break;
  }
  return "session";
}

} // namespace

outcome<worker_template> prepare_worker_template(const pool_config& cfg) {
  worker_template tpl;
  if (cfg.isolation != platform::isolation_mode::namespaces)
    return tpl;
  auto sb = make_sandbox_spec(cfg.sandbox, cfg.harness);
  if (!sb)
    return sb.error().wrap("pool " + cfg.name);
  if (sb->seccomp.enabled) {
    auto compiled = platform::compile_seccomp(sb->seccomp);
    if (!compiled)
      return compiled.error().wrap("pool " + cfg.name);
    sb->seccomp.compiled = std::make_shared<const platform::compiled_seccomp>(std::move(*compiled));
  }
  tpl.sandbox = std::move(*sb);
  if (cfg.warm_start) {
    platform::worker_launcher::options lo;
    lo.binary = cfg.launcher_binary;
    lo.python = cfg.python;
    lo.harness = cfg.harness;
    lo.env = worker_environment();
    lo.stderr_fd = cfg.worker_stderr ? 2 : -1;
    auto launcher = platform::worker_launcher::start(std::move(lo));
    if (!launcher)
      return launcher.error().wrap("pool " + cfg.name);
    tpl.launcher = std::move(*launcher);
  }
  return tpl;
}

outcome<std::unique_ptr<pool_worker>> pool_worker::start(uint64_t id,
                                                               const pool_config& cfg,
                                                               const worker_template& tpl) {
  const std::string what = "worker " + std::to_string(id);
  auto seg = ipc::segment::create(cfg.ring_capacity);
  if (!seg)
    return seg.error().wrap(what);
  auto to_worker = ipc::doorbell::create();
  if (!to_worker)
    return to_worker.error().wrap(what);
  auto to_supervisor = ipc::doorbell::create();
  if (!to_supervisor)
    return to_supervisor.error().wrap(what);
  std::unique_ptr<pool_worker> ch(new pool_worker(
    id, std::move(*seg), std::move(*to_worker), std::move(*to_supervisor)));

  unique_fd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!devnull)
    return errno_failure(what + ": open /dev/null");

  platform::worker_spec spec;
  spec.executable = cfg.worker_binary;
  const bool sandboxed = cfg.isolation == platform::isolation_mode::namespaces;
  spec.argv = {cfg.worker_binary,
               "--segment-fd", std::to_string(segment_child_fd),
               "--to-worker-fd", std::to_string(to_worker_child_fd),
               "--to-supervisor-fd", std::to_string(to_supervisor_child_fd),
               "--python", cfg.python,
               "--harness", sandboxed ? sandboxed_harness_path(cfg.harness) : cfg.harness,
               "--mode", harness_mode_for(cfg.mode)};
  spec.env = worker_environment();
  // The status pipe: PID 1 reports here a layer it could not apply.
  int status_pipe[2];
  if (::pipe2(status_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
    return errno_failure(what + ": status pipe");
  ch->status_.reset(status_pipe[0]);
  unique_fd status_child(status_pipe[1]);
  spec.argv.insert(spec.argv.end(), {"--status-fd", std::to_string(status_child_fd)});
  spec.fds = {{devnull.get(), 0},
              {devnull.get(), 1},
              {cfg.worker_stderr ? 2 : devnull.get(), 2},
              {ch->segment_.fd(), segment_child_fd},
              {ch->to_worker_.fd(), to_worker_child_fd},
              {ch->to_supervisor_.fd(), to_supervisor_child_fd},
              {status_child.get(), status_child_fd}};
  unique_fd sealed;
  unique_fd egress_child; // the worker's end of the egress pair, open until the spawn
  unique_fd control_child;
  std::vector<platform::detached_tree> captured_binds; ///< open until the spawn
  std::string cgroup_unavailable; ///< set when best_effort let the worker start without one
  const platform::cgroup_limits limits{cfg.limits.memory_bytes, cfg.limits.pids,
                                       cfg.limits.cpu_percent};
  if (sandboxed) {
    if (!tpl.sandbox)
      return logic_failure(what + ": the pool's worker template has no sandbox spec");
    std::optional<platform::sandbox_spec> sb = *tpl.sandbox; // this worker's copy
    if (relay_port_of(cfg) != 0) {
      // The egress relay: PID 1 listens on 127.0.0.1:egress_port inside the
      // network namespace and passes each connection over this pair to the
      // proxy. Created here, before the sandbox exists.
      int pair[2];
      if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
        return errno_failure(what + ": egress socketpair");
      ch->egress_link_.reset(pair[0]);
      egress_child.reset(pair[1]);
      ch->exec_marker_ = std::make_shared<std::atomic<uint64_t>>(0);
      // The interpreter may connect to the relay's port (and, in its own
      // network namespace, that reaches only the relay or its own loopback).
      add_egress_relay(*sb, cfg.egress_port);
      sb->egress_fd = egress_child_fd;
      const std::string proxy_url = "http://127.0.0.1:" + std::to_string(cfg.egress_port);
      for (const char* name : {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"})
        spec.env.push_back(std::string(name) + "=" + proxy_url);
      // The sandbox's own loopback stays direct: a local server the code
      // starts is not the proxy's business (and the proxy would refuse it).
      for (const char* name : {"NO_PROXY", "no_proxy"})
        spec.env.push_back(std::string(name) + "=localhost,127.0.0.1,::1");
      spec.fds.push_back({egress_child.get(), egress_child_fd});
    }
    // The harness and the policy's own paths may lie below a directory the
    // worker's user cannot enter (a checkout under a 0700 home): the
    // supervisor captures them, the worker attaches what it is given.
    auto trees = platform::capture_bind_sources(sb->root, first_bind_child_fd);
    if (!trees)
      return trees.error().wrap(what);
    captured_binds = std::move(*trees);
    for (std::size_t k = 0; k < captured_binds.size(); ++k)
      spec.fds.push_back(
        {captured_binds[k].fd.get(), first_bind_child_fd + static_cast<int>(k)});
    auto fd = platform::seal_sandbox_spec(*sb);
    if (!fd)
      return fd.error().wrap(what);
    sealed = std::move(*fd);
    spec.argv.insert(spec.argv.end(),
                     {"--sandbox-spec-fd", std::to_string(sandbox_spec_child_fd)});
    spec.fds.push_back({sealed.get(), sandbox_spec_child_fd});
    if (!sb->notify.empty()) {
      // The worker's listener comes back on this socket before the
      // interpreter starts; a SEQPACKET pair keeps the messages whole.
      int pair[2];
      if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
        return errno_failure(what + ": control socketpair");
      ch->control_.reset(pair[0]);
      control_child.reset(pair[1]);
      if (auto ok = platform::prepare_listener_handover(ch->control_.get()); !ok)
        return ok.error().wrap(what);
      spec.argv.insert(spec.argv.end(), {"--control-fd", std::to_string(control_child_fd)});
      spec.fds.push_back({control_child.get(), control_child_fd});
    }
    spec.isolation = platform::isolation_mode::namespaces;
    spec.memfd_noexec = true; // read back by PID 1: sb->memfd_noexec
    spec.namespaces = {true, true, true, true, true, true, true};
    ch->pid_namespace_ = spec.namespaces.pid;
    spec.hostname = cfg.sandbox.hostname;
    const bool want_cgroup = cfg.sandbox.cgroups && (limits.memory_bytes != 0 ||
                                                     limits.pids != 0 || limits.cpu_percent != 0);
    auto cg = want_cgroup ? create_worker_cgroup(limits) : outcome<platform::worker_cgroup>(
                                                                logic_failure("not requested"));
    if (want_cgroup && !cg) {
      if (!cfg.sandbox.cgroups_best_effort)
        return cg.error().wrap(what);
      // Rootless without a delegated subtree, typically: the policy said
      // the worker may run without limits, and its report will say so.
      cgroup_unavailable = cg.error().describe();
    }
    if (want_cgroup && cg) {
      ch->cgroup_.emplace(std::move(*cg));
      spec.limits = cfg.limits;
      spec.cgroup = ch->cgroup_->placement();
      platform::cgroup_version v = platform::cgroup_version::v1;
      const std::string cpu_dir = ch->cgroup_->directory_of("cpuacct", &v);
      if (!ch->cgroup_->v2_directory().empty() && ch->cgroup_->directory_of("cpu", &v) ==
                                                      ch->cgroup_->v2_directory()) {
        ch->cgroup_v2_ = true;
        ch->cpu_usage_fd_ = open_cgroup_file(ch->cgroup_->v2_directory(), "cpu.stat", O_RDONLY);
      } else {
        ch->cpu_usage_fd_ = open_cgroup_file(cpu_dir, "cpuacct.usage", O_RDONLY);
      }
      const std::string mem_dir = ch->cgroup_->directory_of("memory", &v);
      const bool mem_v1 = v == platform::cgroup_version::v1;
      ch->memory_peak_fd_ = open_cgroup_file(
        mem_dir, mem_v1 ? "memory.max_usage_in_bytes" : "memory.peak", O_RDWR);
      ch->oom_fd_ = open_cgroup_file(mem_dir, mem_v1 ? "memory.oom_control" : "memory.events",
                                     O_RDONLY);
      ch->pids_fd_ = open_cgroup_file(ch->cgroup_->directory_of("pids"), "pids.current", O_RDONLY);
    }
  } else if (cfg.isolation != platform::isolation_mode::none) {
    return logic_failure(what + ": unknown isolation mode");
  }
  auto child = tpl.launcher ? tpl.launcher->spawn(spec) : platform::spawn_worker(spec);
  if (!child)
    return child.error().wrap(what);
  if (sandboxed) {
    // The supervisor's half of the report (namespaces read back from
    // /proc/<pid>/ns, network, cgroup limits read back); the worker's half
    // arrives with READY.
    auto report = platform::spawn_enforcement(spec, child->pid);
    if (report) {
      if (ch->cgroup_) {
        if (auto cge = platform::cgroup_enforcement_of(*ch->cgroup_, limits))
          report->cgroup = std::move(*cge);
      }
      report->cgroup_unavailable = cgroup_unavailable;
      if (tpl.sandbox && !tpl.sandbox->loopback_up && report->network != "host")
        report->network = "none (private network namespace, no interface up)";
      report->start = tpl.launcher ? "warm" : "exec";
      report->mode = to_string(cfg.mode);
      ch->enforcement_ = report->to_json();
    } else {
      ch->enforcement_ =
        nlohmann::json{{"error", report.error().describe()}}.dump();
    }
    if (auto base = read_cgroup_value(ch->oom_fd_.get(), "oom_kill"))
      ch->oom_base_ = *base;
  }
  ch->pid_ = child->pid;
  ch->pidfd_ = std::move(child->pidfd);
  return ch;
}

outcome<void> pool_worker::send(ipc::message_type type, uint32_t request_id,
                                   std::string_view payload) {
  if (type == ipc::message_type::code || type == ipc::message_type::command)
    begin_exec();
  switch (writer_.write(type, request_id, payload)) {
    case ipc::ring_status::ok:
      break;
    case ipc::ring_status::full:
      return logic_failure("to_worker ring full (" + std::to_string(writer_.used_bytes()) +
                           " bytes unread by the worker)");
    default:
      return logic_failure("to_worker ring corrupt (the worker wrote an impossible head)");
  }
  return to_worker_.ring();
}

ipc::read_result pool_worker::receive() {
  auto rd = reader_.read();
  if (rd.status == ipc::ring_status::ok && rd.value.type == ipc::message_type::ready &&
      !enforcement_.empty())
    note_ready(rd.value.payload);
  return rd;
}

void pool_worker::note_ready(std::string_view payload) {
  auto whole = nlohmann::json::parse(enforcement_, nullptr, false);
  const auto ready = nlohmann::json::parse(payload, nullptr, false);
  if (whole.is_discarded() || !whole.is_object())
    return;
  const auto it = ready.is_object() ? ready.find("enforcement") : ready.end();
  if (ready.is_object() && it != ready.end() && it->is_object()) {
    // Only the parts the worker applies itself: it cannot rewrite what the
    // supervisor read back (namespaces, network, cgroup).
    for (const char* key : {"root", "landlock", "seccomp", "capabilities"})
      if (auto part = it->find(key); part != it->end())
        whole[key] = *part;
  } else {
    whole["worker_report"] = "missing from READY";
  }
  enforcement_ = whole.dump();
}

void pool_worker::begin_exec() noexcept {
  if (!cgroup_)
    return;
  if (auto base = read_cgroup_value(oom_fd_.get(), "oom_kill"))
    oom_base_ = *base;
  if (memory_peak_fd_)
    (void)!::pwrite(memory_peak_fd_.get(), cgroup_v2_ ? "reset" : "0", cgroup_v2_ ? 5 : 1, 0);
  cpu_base_us_ = 0;
  if (auto cpu = read_cgroup_value(cpu_usage_fd_.get(), cgroup_v2_ ? "usage_usec" : nullptr))
    cpu_base_us_ = cgroup_v2_ ? *cpu : *cpu / 1000;
}

resource_usage pool_worker::exec_usage() const noexcept {
  resource_usage u;
  if (!cgroup_)
    return u;
  if (auto cpu = read_cgroup_value(cpu_usage_fd_.get(), cgroup_v2_ ? "usage_usec" : nullptr)) {
    const uint64_t now_us = cgroup_v2_ ? *cpu : *cpu / 1000;
    u.cpu_us = now_us > cpu_base_us_ ? now_us - cpu_base_us_ : 0;
  }
  if (auto peak = read_cgroup_value(memory_peak_fd_.get(), nullptr))
    u.peak_memory_bytes = *peak;
  return u;
}

std::optional<uint64_t> pool_worker::tasks() const noexcept {
  return read_cgroup_value(pids_fd_.get(), nullptr);
}

std::optional<platform::cgroup_usage> pool_worker::cgroup_usage() const {
  if (!cgroup_)
    return std::nullopt;
  auto u = cgroup_->usage();
  if (!u)
    return std::nullopt;
  return std::move(*u);
}

bool pool_worker::oom_killed() const noexcept {
  auto now = read_cgroup_value(oom_fd_.get(), "oom_kill");
  return now && *now > oom_base_;
}

pool_worker::~pool_worker() {
  if (reaped_ || !pidfd_)
    return;
  kill();
  (void)platform::pidfd_reap(pidfd_.get());
}

platform::worker_kill_report pool_worker::kill() noexcept {
  if (reaped_ || pid_ <= 0)
    return {};
  // SIGKILL to castellan-worker, the init of the sandbox's pid namespace,
  // makes the kernel kill everything in that namespace (and fork no more);
  // the cgroup reaches every task however it forked; and castellan-worker
  // leads its own process group, the only reach for an unsandboxed worker.
  platform::worker_kill_target target;
  target.init_pidfd = pidfd_.get();
  target.init_owns_pid_namespace = pid_namespace_;
  target.process_group = pid_;
  target.cgroup = cgroup_ ? &*cgroup_ : nullptr;
  return platform::kill_worker_tree(target);
}

std::string pool_worker::reap() noexcept {
  if (reaped_)
    return "already reaped";
  auto st = platform::pidfd_try_reap(pidfd_.get());
  if (!st)
    return st.error().describe();
  if (!*st)
    return "still running";
  reaped_ = true;
  // A layer is named only from what PID 1 said on the status pipe, never
  // from the exit status: the code chooses that once it runs.
  return (*st)->describe() + status_note(status_.get());
}

} // namespace castellan
