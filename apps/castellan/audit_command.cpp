/// @file audit_command.cpp
/// `castellan audit tail FILE`: pretty-prints an audit log (docs/audit.md),
/// filtered by kind, exec and time, optionally following it as it grows and
/// across rotations.

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <iostream>
#include <memory>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <CLI/CLI.hpp>

#include "actors/audit/audit_kind.hpp"
#include "actors/audit/audit_query.hpp"
#include "actors/audit/rfc3339.hpp"
#include "apps/castellan/cli_context.hpp"

namespace castellan::cli {

namespace {

struct tail_args {
  std::string file;
  std::vector<std::string> kinds;
  uint64_t exec_id = 0;
  std::string since;
  bool json = false;
  bool follow = false;
};

volatile std::sig_atomic_t stop_following = 0;

extern "C" void on_stop_signal(int) {
  stop_following = 1;
}

/// Reads a growing file line by line; a line is complete only with its
/// newline, so a record the writer is still appending is never cut.
class line_reader {
public:
  ~line_reader() { close(); }

  bool open(const std::string& path) {
    close();
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0)
      return false;
    struct stat st {};
    ::fstat(fd_, &st);
    ino_ = st.st_ino;
    offset_ = 0;
    buf_.clear();
    return true;
  }

  void close() {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = -1;
  }

  /// Calls `on_line` for every complete line now readable.
  template <class F> void drain(F&& on_line) {
    char chunk[65536];
    for (;;) {
      const auto n = ::read(fd_, chunk, sizeof(chunk));
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      offset_ += n;
      buf_.append(chunk, static_cast<size_t>(n));
      size_t start = 0;
      for (auto nl = buf_.find('\n'); nl != std::string::npos; nl = buf_.find('\n', start)) {
        on_line(std::string_view(buf_).substr(start, nl - start));
        start = nl + 1;
      }
      buf_.erase(0, start);
    }
  }

  /// What is left after the last newline (a final line without one).
  std::string take_rest() { return std::exchange(buf_, {}); }

  /// True if `path` is now another file (rotated) or shorter (truncated).
  bool replaced(const std::string& path) const {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
      return false; // between rename and reopen: keep reading the old one
    return st.st_ino != ino_ || st.st_size < offset_;
  }

private:
  int fd_ = -1;
  ino_t ino_ = 0;
  off_t offset_ = 0;
  std::string buf_;
};

void run_tail(const tail_args& a, cli_context& ctx) {
  tail_filter filter;
  for (const auto& k : a.kinds) {
    audit_kind parsed;
    if (!from_string(k, parsed)) {
      std::string known;
      for (auto x : all_audit_kinds)
        known += (known.empty() ? "" : ", ") + std::string{kind_name(x)};
      std::cerr << "castellan audit tail: unknown kind '" << k << "' (known: " << known << ")\n";
      ctx.exit_code = usage_exit_code;
      return;
    }
    filter.kinds.insert(k);
  }
  filter.exec_id = a.exec_id;
  if (!a.since.empty() && !parse_since(a.since, realtime_ns(), filter.since_ns)) {
    std::cerr << "castellan audit tail: --since wants an RFC 3339 time or a duration such as "
                 "90s, 15m, 2h, 1d; got '"
              << a.since << "'\n";
    ctx.exit_code = usage_exit_code;
    return;
  }
  line_reader reader;
  if (!reader.open(a.file)) {
    std::cerr << "castellan audit tail: cannot open " << a.file << ": " << std::strerror(errno)
              << '\n';
    ctx.exit_code = usage_exit_code;
    return;
  }
  uint64_t malformed = 0;
  auto show = [&](std::string_view line) {
    if (line.empty())
      return;
    auto rec = parse_audit_line(line);
    if (!rec) {
      ++malformed;
      return;
    }
    if (!tail_matches(filter, *rec))
      return;
    if (a.json)
      std::cout << line << '\n';
    else
      std::cout << pretty_audit_line(*rec) << '\n';
  };
  reader.drain(show);
  if (a.follow) {
    std::signal(SIGINT, on_stop_signal);
    std::signal(SIGTERM, on_stop_signal);
    std::cout.flush();
    while (stop_following == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      reader.drain(show);
      if (reader.replaced(a.file)) {
        reader.drain(show); // what the writer added before rotating
        show(reader.take_rest());
        if (!reader.open(a.file))
          continue;
        reader.drain(show);
      }
      std::cout.flush();
    }
  }
  show(reader.take_rest());
  std::cout.flush();
  if (malformed > 0)
    std::cerr << "castellan audit tail: skipped " << malformed
              << " line(s) that are not audit records\n";
}

} // namespace

void add_audit_commands(CLI::App& app, cli_context& ctx) {
  CLI::App* audit = app.add_subcommand("audit", "Read audit logs");
  audit->require_subcommand(1);
  auto args = std::make_shared<tail_args>();
  CLI::App* tail = audit->add_subcommand(
      "tail", "Pretty-print an audit log (JSON lines), filtered; --follow keeps reading");
  tail->add_option("file", args->file, "The audit log (castellan exec --audit-log FILE)")
      ->required();
  tail->add_option("--kind", args->kinds,
                   "Only records of this kind (repeatable): exec_start, exec_end, "
                   "syscall_denied, policy_warning, optimistic_violation, policy_rejected, "
                   "timeout, oom, worker_lost, connection, drop_report, policy_event");
  tail->add_option("--exec", args->exec_id, "Only records of this exec id");
  tail->add_option("--since", args->since,
                   "Only records at or after this time: RFC 3339, or a duration ago (90s, 15m, "
                   "2h, 1d)");
  tail->add_flag("--json", args->json, "Print the matching records as JSON lines, unchanged");
  tail->add_flag("--follow,-f", args->follow,
                 "Keep reading as the log grows, across rotations, until interrupted");
  tail->callback([args, &ctx] { run_tail(*args, ctx); });
}

} // namespace castellan::cli
