/// @file mediated_exec.cpp
/// The exec family (execve, execveat), decided by syscall_mediator on the
/// path the caller names, lexically and after resolution in its root, and
/// on the interpreter a script's #! line names (which the kernel starts as
/// a program too). An allowed call continues in the kernel: it reads the
/// path again, which is safe only because Landlock's EXECUTE rights stand
/// behind the decision (docs/security.md, "Exec rules").

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <string_view>

#include "actors/mediation/decided_call.hpp"
#include "actors/mediation/paths_in_root.hpp"
#include "actors/mediation/sandbox_fixed_paths.hpp"
#include "actors/mediation/syscall_mediator.hpp"

namespace castellan {

namespace {

namespace pol = policy;
using namespace mediation;

/// The interpreter a script at `path` (inside the worker's root) names on
/// its #! line, as the kernel reads it (the first line of at most the first
/// 256 bytes, the word after "#!"); "" for anything else. This thread reads
/// as the supervisor, so it reads only what the kernel would: a regular
/// file with an execute bit (the kernel runs nothing else), outside /proc
/// (another process's entries), opened without waiting.
std::string script_interpreter(int root, const std::string& path) {
  unique_fd opath(open_in_root(root, path, O_PATH | O_CLOEXEC));
  struct stat st;
  if (!opath || ::fstat(opath.get(), &st) != 0 || !S_ISREG(st.st_mode) || (st.st_mode & 0111) == 0)
    return {};
  std::string where;
  if (fd_path(opath.get(), where) != 0 || where == "/proc" || where.rfind("/proc/", 0) == 0)
    return {};
  const std::string self = "/proc/self/fd/" + std::to_string(opath.get());
  unique_fd file(::open(self.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!file)
    return {};
  char buf[256];
  const ssize_t n = ::pread(file.get(), buf, sizeof buf, 0);
  if (n < 3 || buf[0] != '#' || buf[1] != '!')
    return {};
  std::string_view line(buf + 2, static_cast<std::size_t>(n) - 2);
  line = line.substr(0, line.find('\n'));
  const auto start = line.find_first_not_of(" \t");
  if (start == std::string_view::npos)
    return {};
  line = line.substr(start);
  return std::string(line.substr(0, line.find_first_of(" \t")));
}

} // namespace

void syscall_mediator::decide_exec(mediated_worker& w, call& c, mediation_result& r) {
  auto& n = c.n;
  auto& listener = *w.listener;
  auto fail = [&](int err) { c.fail(err); };
  const bool at = n.nr == SYS_execveat;
  const int dirfd = at ? static_cast<int>(n.args[0]) : AT_FDCWD;
  auto path = c.caller.read_string(at ? n.args[1] : n.args[0], max_path);
  if (!path)
    return fail(path.error().code != 0 ? path.error().code : EFAULT);
  if (!c.still_waiting())
    return c.gone();
  std::string abs;
  if (path->empty()) {
    if (!at || (n.args[4] & AT_EMPTY_PATH) == 0)
      return fail(ENOENT);
    if (int err = c.caller.link_path("fd/" + std::to_string(dirfd), abs); err != 0)
      return fail(err);
  } else if (int err = absolute(c.caller, dirfd, *path, abs); err != 0) {
    return fail(err);
  }
  pol::decision d;
  std::string target;
  // The program, lexically and resolved in the root (the more restrictive
  // wins); then, for a script, the interpreter its #! line names, which the
  // kernel starts as a program too (up to four levels, as the kernel).
  // The dynamic loader keeps Landlock EXECUTE for the programs that name
  // it: run as a program itself it is refused here by the exec default too
  // (a deny default, not left to the static layers), unless a rule allows
  // it. The kernel's own loading of an ELF interpreter is no system call.
  auto is_loader = [](const std::string& p) {
    const auto& l = elf_loaders();
    return std::find(l.begin(), l.end(), p) != l.end();
  };
  auto consider = [&](const std::string& program) {
    const std::string lexical = normalise(program);
    auto weigh = [&](const std::string& p) {
      const auto full = policy_->check_exec(p);
      const auto dp = is_loader(p) ? full : rules_only(full);
      if (target.empty() || static_cast<int>(dp.verdict) > static_cast<int>(d.verdict)) {
        d = dp;
        target = p;
      }
    };
    weigh(lexical);
    unique_fd opath(open_in_root(w.root.get(), program, O_PATH | O_CLOEXEC));
    std::string canon;
    if (opath && fd_path(opath.get(), canon) == 0 && canon != lexical)
      weigh(canon);
  };
  consider(abs);
  std::string script = abs;
  for (int depth = 0; depth < 4 && d.verdict != pol::action::deny; ++depth) {
    const std::string interpreter = script_interpreter(w.root.get(), script);
    std::string next;
    if (interpreter.empty() || absolute(c.caller, AT_FDCWD, interpreter, next) != 0)
      break;
    consider(next);
    script = next;
  }
  if (d.verdict == pol::action::deny)
    return deny(c, target, d);
  if (!listener.respond_continue(n.id))
    return c.gone();
  r.what = mediation_result::outcome::allow;
  if (d.verdict == pol::action::warn)
    warn(c, target, d);
}

} // namespace castellan
