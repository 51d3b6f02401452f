/// @file audit_command.cpp
/// `castellan audit tail FILE`: pretty-prints an audit log (docs/audit.md),
/// filtered by kind, exec and time, optionally following it as it grows and
/// across rotations. With `--connect` (or CASTELLAN_CONNECT) it reads a
/// daemon's live audit instead (`GET /v1/audit`, docs/api.md).

#include <cerrno>
#include <cstdlib>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <iostream>
#include <memory>
#include <string>
#include <sys/socket.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <CLI/CLI.hpp>

#include "actors/audit/audit_kind.hpp"
#include "actors/audit/audit_query.hpp"
#include "actors/audit/rfc3339.hpp"
#include "apps/castellan/cli_context.hpp"
#include "apps/castellan/daemon_client.hpp"

namespace castellan::cli {

namespace {

struct tail_args {
  std::string file;
  std::vector<std::string> kinds;
  uint64_t exec_id = 0;
  std::string since;
  bool json = false;
  bool follow = false;
  std::string connect; ///< --connect: a daemon's live audit instead of a file
};

volatile std::sig_atomic_t stop_following = 0;
/// The daemon connection of a remote tail: shut down (async-signal-safe)
/// by the signal handler, which ends the blocked read.
volatile std::sig_atomic_t stream_fd = -1;

extern "C" void on_stop_signal(int) {
  stop_following = 1;
  if (stream_fd >= 0)
    ::shutdown(stream_fd, SHUT_RDWR);
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

/// `text` percent-encoded for a query string.
std::string query_escape(const std::string& text) {
  static const char hex[] = "0123456789ABCDEF";
  std::string out;
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '_' || c == '.' || c == '~' || c == ':') {
      out += ch;
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

/// The records of a daemon's live audit, printed as the file mode prints
/// them. Without --follow it stops once the history (--since) is printed.
void run_remote_tail(const tail_args& a, const std::string& target, cli_context& ctx) {
  if (!a.follow && a.since.empty()) {
    std::cerr << "castellan audit tail: --connect reads a live stream: give --follow, or --since "
                 "for the records the daemon holds\n";
    ctx.exit_code = usage_exit_code;
    return;
  }
  int64_t since_ns = 0;
  if (!a.since.empty() && !parse_since(a.since, realtime_ns(), since_ns)) {
    std::cerr << "castellan audit tail: --since wants an RFC 3339 time or a duration such as "
                 "90s, 15m, 2h, 1d; got '"
              << a.since << "'\n";
    ctx.exit_code = usage_exit_code;
    return;
  }
  std::string query;
  auto add = [&](const std::string& name, const std::string& value) {
    query += (query.empty() ? "?" : "&") + name + "=" + query_escape(value);
  };
  for (const auto& k : a.kinds)
    add("kind", k);
  if (a.exec_id != 0)
    add("exec", std::to_string(a.exec_id));
  if (!a.since.empty())
    add("since", a.since);
  auto where = daemon_address::parse(target);
  if (!where) {
    std::cerr << "castellan audit tail: --connect: " << where.error().describe() << "\n";
    ctx.exit_code = usage_exit_code;
    return;
  }
  const char* token = std::getenv("CASTELLAN_TOKEN");
  auto client = daemon_client::connect(*where, token != nullptr ? token : "");
  if (!client) {
    std::cerr << "castellan audit tail: " << client.error().describe() << "\n";
    ctx.exit_code = usage_exit_code;
    return;
  }
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  stream_fd = (*client)->native_handle();
  if (stop_following != 0) // a signal before the descriptor was known
    ::shutdown(stream_fd, SHUT_RDWR);
  std::string pending;
  bool ended = false;
  // One event: its `event:` name and its `data:` line (comments aside).
  auto on_event = [&](std::string_view block) {
    std::string_view name;
    std::string_view data;
    while (!block.empty()) {
      const auto nl = block.find('\n');
      std::string_view line = block.substr(0, nl);
      block = nl == std::string_view::npos ? std::string_view{} : block.substr(nl + 1);
      if (line.substr(0, 7) == "event: ")
        name = line.substr(7);
      else if (line.substr(0, 6) == "data: ")
        data = line.substr(6);
    }
    if (name == "audit") {
      auto rec = parse_audit_line(data);
      if (!rec)
        return true;
      if (a.json)
        std::cout << data << '\n';
      else
        std::cout << pretty_audit_line(*rec) << '\n';
      std::cout.flush();
    } else if (name == "dropped") {
      auto j = nlohmann::json::parse(data.begin(), data.end(), nullptr, false);
      std::cerr << "castellan audit tail: "
                << (j.is_object() && j.contains("dropped") ? j["dropped"].dump() : "some")
                << " record(s) dropped: this client fell behind the daemon\n";
    } else if (name == "live") {
      if (!a.follow) {
        ended = true;
        return false;
      }
    } else if (name == "end") {
      ended = true;
      return false;
    }
    return true;
  };
  auto reply = (*client)->get_stream("/v1/audit" + query, [&](std::string_view bytes) {
    pending.append(bytes);
    std::size_t start = 0;
    for (auto sep = pending.find("\n\n"); sep != std::string::npos;
         sep = pending.find("\n\n", start)) {
      const bool go_on = on_event(std::string_view(pending).substr(start, sep - start));
      start = sep + 2;
      if (!go_on) {
        pending.erase(0, start);
        return false;
      }
    }
    pending.erase(0, start);
    return true;
  });
  stream_fd = -1;
  std::cout.flush();
  if (stop_following != 0)
    return; // interrupted: as the file mode, a clean end
  if (!reply) {
    std::cerr << "castellan audit tail: " << target << ": " << reply.error().describe() << "\n";
    ctx.exit_code = 1;
    return;
  }
  if (reply->status != 200) {
    std::cerr << "castellan audit tail: the daemon refused: " << reply->error_message() << "\n";
    ctx.exit_code = reply->status == 400 || reply->status == 404 ? usage_exit_code : 1;
    return;
  }
  if (!ended && a.follow) {
    std::cerr << "castellan audit tail: the daemon closed the stream\n";
    ctx.exit_code = 1;
  }
}

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
  if (!a.connect.empty() && !a.file.empty()) {
    std::cerr << "castellan audit tail: give a FILE or --connect, not both\n";
    ctx.exit_code = usage_exit_code;
    return;
  }
  if (a.file.empty()) {
    const std::string target = connect_target(a.connect);
    if (target.empty()) {
      std::cerr << "castellan audit tail: give the audit log FILE, or --connect (or "
                   "CASTELLAN_CONNECT) for a daemon's live audit\n";
      ctx.exit_code = usage_exit_code;
      return;
    }
    run_remote_tail(a, target, ctx);
    return;
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
  tail->add_option("file", args->file,
                   "The audit log (castellan exec --audit-log FILE); without it, --connect");
  tail->add_option("--connect", args->connect,
                   "Read a daemon's live audit (GET /v1/audit) instead of a file: unix:PATH, "
                   "http://HOST:PORT or https://HOST:PORT (default: $CASTELLAN_CONNECT when no "
                   "FILE is given; $CASTELLAN_TOKEN is sent as the bearer token)");
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
