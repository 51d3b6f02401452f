#include "apps/castellan/remote_exec.hpp"

#include "apps/castellan/file_transfer.hpp"

#include <sys/random.h>

#include <cstdio>
#include <iostream>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "actors/exec_json.hpp"
#include "actors/json_bytes.hpp"
#include "apps/castellan/cli_context.hpp"
#include "apps/castellan/daemon_client.hpp"
#include "apps/castellan/interrupt_canceller.hpp"
#include "apps/castellan/result_output.hpp"
#include "apps/castellan/sse_reader.hpp"

namespace castellan::cli {

namespace {

using json = nlohmann::json;

/// The exit code of a request the daemon refused for its load (the code a
/// `busy` result has when the CLI runs the exec itself).
constexpr int refused_exit_code = 1;

/// The token for the daemon: CASTELLAN_TOKEN, else none.
std::string token() {
  const char* t = std::getenv("CASTELLAN_TOKEN");
  return t != nullptr ? t : "";
}

/// A name for the exec, chosen here so that a cancel can refer to it before
/// the daemon answers: "cli-" and 16 random hex digits.
std::string fresh_exec_name() {
  unsigned char bytes[8] = {};
  std::size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n <= 0)
      break;
    got += static_cast<std::size_t>(n);
  }
  std::string out = "cli-";
  char hex[3];
  for (unsigned char b : bytes) {
    std::snprintf(hex, sizeof hex, "%02x", b);
    out += hex;
  }
  return out;
}

/// The API body for `req` (docs/api.md).
json request_body(const remote_options& o, const exec_request& req, const std::string& name,
                  std::chrono::steady_clock::time_point started) {
  json body;
  if (req.argv.empty())
    body["code"] = req.code;
  else
    body["argv"] = req.argv;
  body["id"] = name;
  if (!o.pool.empty())
    body["pool"] = o.pool;
  if (!o.request_policy_json.empty())
    body["policy"] = json::parse(o.request_policy_json);
  if (o.timeout_ms) {
    // --timeout bounds the whole command, the connection included.
    const auto spent = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                               std::chrono::steady_clock::now() - started)
                                               .count());
    body["timeout_ms"] = *o.timeout_ms > spent ? *o.timeout_ms - spent : 1;
  }
  if (!req.env.empty()) {
    json env = json::object();
    for (const auto& e : req.env) {
      const auto eq = e.find('=');
      env[e.substr(0, eq)] = e.substr(eq + 1); // a later one wins, as in the worker
    }
    body["env"] = std::move(env);
  }
  if (!req.cwd.empty())
    body["cwd"] = req.cwd;
  if (!req.stdin_data.empty()) {
    if (is_utf8(req.stdin_data))
      body["stdin"] = req.stdin_data;
    else
      body["stdin_base64"] = base64_encode(req.stdin_data);
  }
  if (!req.files_in.empty()) {
    json files = json::array();
    for (const auto& f : req.files_in) {
      json e = {{"path", f.path}, {"mode", f.mode}};
      if (is_utf8(f.content))
        e["content"] = f.content;
      else
        e["content_base64"] = base64_encode(f.content);
      files.push_back(std::move(e));
    }
    body["files_in"] = std::move(files);
  }
  if (!req.files_out.empty())
    body["files_out"] = req.files_out;
  return body;
}

} // namespace

int report_error(const daemon_reply& reply) {
  const std::string code = reply.error_code();
  if (code == "busy" || code == "draining" || code == "too_many_execs" ||
      code == "too_many_sessions") {
    // Load, not a mistake: as a `busy` result is shown.
    std::cerr << "castellan: busy: " << reply.error_message() << "\n";
    return refused_exit_code;
  }
  std::cerr << "castellan: the daemon refused the request: " << reply.error_message() << "\n";
  return usage_exit_code;
}

namespace {

/// The longest event a streamed answer may have (the result), as much as
/// daemon_client reads of a plain answer.
constexpr std::size_t max_event_bytes = std::size_t{256} << 20;

/// A streamed exec's events (docs/api.md, "Streamed output"): each piece of
/// output printed as it comes, then the result kept for what it adds.
class streamed_exec {
public:
  /// One event; false once there is nothing more to read.
  bool on_event(std::string_view event, std::string_view data) {
    if (event == "stdout" || event == "stderr") {
      auto j = json::parse(data.begin(), data.end(), nullptr, false);
      if (!j.is_object() || !j.contains("data") || !j["data"].is_string())
        return fail("an output event is unreadable");
      std::string bytes = j["data"].get<std::string>();
      if (j.contains("base64") && j["base64"] == true) {
        auto decoded = base64_decode(bytes);
        if (!decoded)
          return fail("an output event is not base64");
        bytes = std::move(*decoded);
      }
      const bool is_stderr = event == "stderr";
      print_output(is_stderr, bytes);
      (is_stderr ? stderr_done_ : stdout_done_) += bytes.size();
      return true;
    }
    if (event == "result") {
      auto j = json::parse(data.begin(), data.end(), nullptr, false);
      auto r = j.is_discarded() ? outcome<exec_result>(logic_failure("not JSON"))
                                : result_from_json(j);
      if (!r)
        return fail("the daemon's answer is unreadable: " + r.error().describe());
      result_ = std::move(*r);
      return false;
    }
    if (event == "error") {
      // The error body of a failure after the output began.
      daemon_reply err;
      err.status = 500;
      err.body = std::string(data);
      return fail(err.error_message());
    }
    return true; // an event this client does not know
  }

  /// Ends the stream without a result, for `why`.
  void give_up(std::string why) { fail(std::move(why)); }

  /// The result, once its event came.
  const std::optional<exec_result>& result() const { return result_; }
  /// Why the stream ended without a result.
  const std::string& problem() const { return problem_; }

  /// What the result adds to the output already printed: the rest of
  /// stdout and stderr, and castellan's notes (print_result's text).
  void print_rest() const { print_result_rest(*result_, stdout_done_, stderr_done_); }

private:
  bool fail(std::string why) {
    problem_ = std::move(why);
    return false;
  }

  std::size_t stdout_done_ = 0;
  std::size_t stderr_done_ = 0;
  std::optional<exec_result> result_;
  std::string problem_;
};

} // namespace

outcome<std::unique_ptr<daemon_client>> connect_to(const std::string& target) {
  auto where = daemon_address::parse(target);
  if (!where)
    return where.error();
  return daemon_client::connect(*where, token());
}

daemon_answer ask_daemon(const std::string& target, const std::string& method,
                         const std::string& route, const std::string& body) {
  daemon_answer out;
  auto client = connect_to(target);
  if (!client) {
    std::cerr << "castellan: " << client.error().describe() << "\n";
    out.exit_code = usage_exit_code;
    return out;
  }
  auto reply = (*client)->request(method, route, body);
  if (!reply) {
    std::cerr << "castellan: " << target << ": " << reply.error().describe() << "\n";
    out.exit_code = usage_exit_code;
    return out;
  }
  if (reply->status < 200 || reply->status >= 300) {
    out.exit_code = report_error(*reply);
    return out;
  }
  out.body = json::parse(reply->body, nullptr, false);
  if (!out.body.is_object()) {
    std::cerr << "castellan: the daemon's answer is unreadable: not a JSON object\n";
    out.exit_code = usage_exit_code;
  }
  return out;
}

int run_remote(const remote_options& o, const exec_request& req,
               std::chrono::steady_clock::time_point started) {
  sigint_block block_sigint;
  auto client = connect_to(o.target);
  if (!client) {
    std::cerr << "castellan: " << client.error().describe() << "\n";
    return usage_exit_code;
  }
  const std::string name = fresh_exec_name();
  const std::string body = dump_json(request_body(o, req, name, started));
  const std::string route = (o.session.empty() ? "/v1" : "/v1/sessions/" + o.session) +
                            (req.argv.empty() ? "/exec" : "/run");
  outcome<daemon_reply> reply = logic_failure("no answer");
  streamed_exec stream;
  {
    interrupt_canceller canceller([&] {
      // One write per line: the main thread may be printing streamed
      // output to stderr meanwhile.
      std::cerr << ("castellan: interrupted: cancelling exec " + name +
                    (o.session.empty() ? "" : " (which ends session " + o.session + ")") + "\n");
      auto side = connect_to(o.target);
      auto cancelled = side ? (*side)->request("DELETE", "/v1/execs/" + name)
                            : outcome<daemon_reply>(side.error());
      if (cancelled && (cancelled->status == 202 || cancelled->status == 404))
        return; // cancelled, or already over: its answer comes on the request
      // No cancel route: going away cancels the exec, without its output.
      std::cerr << ("castellan: cancel: " +
                    (cancelled ? cancelled->error_message() : cancelled.error().describe()) +
                    "; closing the connection\n");
      (*client)->shut_down();
    });
    if (o.json) {
      reply = (*client)->request("POST", route, body);
    } else {
      // Output is printed as the daemon streams it; the result event then
      // says what is left to print.
      sse_reader events;
      reply = (*client)->request_stream("POST", route, body, [&](std::string_view bytes) {
        const bool go_on = events.feed(bytes, [&](std::string_view event, std::string_view data) {
          return stream.on_event(event, data);
        });
        // The largest event is the result, within the limit of a plain answer.
        if (go_on && events.pending() > max_event_bytes) {
          stream.give_up("an event is longer than " + std::to_string(max_event_bytes >> 20) +
                         " MiB");
          return false;
        }
        return go_on;
      });
    }
  }
  if (!reply) {
    std::cerr << "castellan: " << o.target << ": " << reply.error().describe() << "\n";
    return usage_exit_code;
  }
  if (reply->status != 200)
    return report_error(*reply);
  if (!o.json) {
    if (!stream.result()) {
      std::cerr << "castellan: " << o.target << ": "
                << (stream.problem().empty() ? "the answer ended without a result"
                                             : stream.problem())
                << "\n";
      return usage_exit_code;
    }
    stream.print_rest();
    save_files_out(*stream.result(), o.file_out_locals);
    return stream.result()->exit_code;
  }
  auto parsed = json::parse(reply->body, nullptr, false);
  auto result = parsed.is_discarded() ? outcome<exec_result>(logic_failure("not JSON"))
                                      : result_from_json(parsed);
  if (!result) {
    std::cerr << "castellan: the daemon's answer is unreadable: " << result.error().describe()
              << "\n";
    return usage_exit_code;
  }
  print_result(*result, o.json);
  save_files_out(*result, o.file_out_locals);
  return result->exit_code;
}

int remote_status(const std::string& target, bool metrics) {
  auto client = connect_to(target);
  if (!client) {
    std::cerr << "castellan: " << client.error().describe() << "\n";
    return usage_exit_code;
  }
  auto reply = (*client)->request("GET", metrics ? "/metrics" : "/v1/pools");
  if (!reply) {
    std::cerr << "castellan: " << target << ": " << reply.error().describe() << "\n";
    return usage_exit_code;
  }
  if (reply->status != 200)
    return report_error(*reply);
  if (metrics) {
    std::cout << reply->body;
    return 0;
  }
  auto j = json::parse(reply->body, nullptr, false);
  if (!j.is_object() || !j.contains("pools") || !j["pools"].is_array()) {
    std::cerr << "castellan: the daemon's answer is unreadable: no pools\n";
    return usage_exit_code;
  }
  try {
    for (const auto& p : j["pools"]) {
      pool_status s;
      s.name = p.value("name", "");
      s.size = p.value("size", 0u);
      s.idle = p.value("idle", 0u);
      s.busy = p.value("busy", 0u);
      s.starting = p.value("starting", 0u);
      s.queued = p.value("queued", 0u);
      s.queue_limit = p.value("queue_limit", 0u);
      s.spawned = p.value("spawned", uint64_t{0});
      s.completed = p.value("completed", uint64_t{0});
      s.lost = p.value("lost", uint64_t{0});
      std::cout << pool_line(s) << "\n";
    }
  } catch (const json::exception& e) {
    std::cerr << "castellan: the daemon's answer is unreadable: " << e.what() << "\n";
    return usage_exit_code;
  }
  return 0;
}

} // namespace castellan::cli
