#include "actors/api/session_files_routes.hpp"

#include <chrono>
#include <cstdio>
#include <optional>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/api/api_actor.hpp"
#include "actors/api/api_error.hpp"
#include "actors/api/percent_decoding.hpp"
#include "actors/audit/rfc3339.hpp"
#include "actors/errors.hpp"
#include "actors/session/session_files.hpp"

namespace castellan::api {

namespace {

using json = nlohmann::json;

/// How long a files operation may take before the API answers 503.
constexpr auto op_timeout = std::chrono::minutes(5);

http_response json_response(unsigned status, std::string body) {
  http_response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

http_response bad(unsigned status, std::string_view code, const std::string& message) {
  return json_response(status, error_body(code, message));
}

std::string octal(uint32_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", mode & 07777u);
  return buf;
}

json entry_json(const files_entry& e) {
  json j = {{"name", e.name},
            {"type", e.type},
            {"size", e.size},
            {"mode", octal(e.mode)},
            {"mtime", format_rfc3339(e.mtime_ns)}};
  if (e.type == "symlink")
    j["target"] = e.link_target;
  return j;
}

http_response reply_error(const files_reply& r) {
  return json_response(files_error_status(r.error), error_body(r.error, r.message));
}

/// A session-level refusal of a files operation (the supervisor's or the
/// session's): the session does not exist, has no workspace, or runs too
/// many files operations.
http_response session_error(const caf::error& err, const caf::actor_system& sys) {
  if (err.category() == caf::detail::error_factory<castellan_errc>::category) {
    const std::string message = describe(err, sys);
    switch (static_cast<castellan_errc>(err.code())) {
      case castellan_errc::invalid_request:
        return bad(409, "no_workspace", message);
      case castellan_errc::busy:
        return bad(429, "too_many_transfers", message);
      default:
        break;
    }
  }
  if (err == caf::sec::request_timeout)
    return bad(503, "unavailable", "the files operation did not answer in time");
  return supervisor_error(err, sys);
}

struct job_data {
  caf::event_based_actor* self = nullptr;
  supervisor_actor supervisor;
  std::shared_ptr<files_sink> sink;
  uint64_t id = 0;
  files_http_request req;
  files_job_actor transfer;
  int unwritten = 0; ///< pieces handed to the server, not yet written
  bool reading = false;
};

void finish_job(const std::shared_ptr<job_data>& d) { d->self->quit(); }

/// Reads the next chunk when fewer than two wait for the socket.
void pump(const std::shared_ptr<job_data>& d) {
  if (d->reading || d->unwritten >= 2 || !d->transfer)
    return;
  d->reading = true;
  d->self->request(d->transfer, std::chrono::seconds(60), files_read_atom::value)
    .then(
      [d](std::string& chunk) {
        d->reading = false;
        if (chunk.empty()) {
          d->sink->files_finish(d->id);
          d->transfer = nullptr;
          finish_job(d);
          return;
        }
        ++d->unwritten;
        caf::actor me = caf::actor_cast<caf::actor>(d->self);
        d->sink->files_piece(d->id, std::move(chunk),
                       [me] { caf::anon_send(me, written_atom::value); });
        pump(d);
      },
      [d](caf::error&) {
        // Cut short: the client gets fewer bytes than the Content-Length.
        d->sink->files_finish(d->id);
        d->transfer = nullptr;
        finish_job(d);
      });
}

void list_instead(const std::shared_ptr<job_data>& d) {
  files_request list;
  list.op = files_op::list;
  list.path = d->req.request.path;
  d->self->request(d->supervisor, op_timeout, files_atom::value, d->req.session, std::move(list))
    .then(
      [d](files_reply& r) {
        if (!r.error.empty()) {
          d->sink->files_respond(d->id, reply_error(r));
        } else {
          json entries = json::array();
          for (const auto& e : r.entries)
            entries.push_back(entry_json(e));
          json body = {{"v", 1}, {"path", r.path}, {"type", "directory"},
                       {"entries", std::move(entries)}, {"truncated", r.truncated}};
          d->sink->files_respond(d->id, json_response(200, body.dump()));
        }
        finish_job(d);
      },
      [d](caf::error& err) {
        d->sink->files_respond(d->id, session_error(err, d->self->system()));
        finish_job(d);
      });
}

void start_get(const std::shared_ptr<job_data>& d) {
  d->self->request(d->supervisor, op_timeout, files_download_atom::value, d->req.session,
                   d->req.request.path)
    .then(
      [d](download_ticket& t) {
        if (t.head.error == "is_a_directory") {
          list_instead(d);
          return;
        }
        if (!t.head.error.empty()) {
          d->sink->files_respond(d->id, reply_error(t.head));
          finish_job(d);
          return;
        }
        d->transfer = caf::actor_cast<files_job_actor>(t.transfer);
        d->sink->files_head(d->id, t.head.entry.size);
        if (t.head.entry.size == 0) {
          // Nothing to read: the transfer actor goes at once.
          caf::anon_send_exit(d->transfer, caf::exit_reason::user_shutdown);
          d->transfer = nullptr;
          d->sink->files_finish(d->id);
          finish_job(d);
          return;
        }
        pump(d);
      },
      [d](caf::error& err) {
        d->sink->files_respond(d->id, session_error(err, d->self->system()));
        finish_job(d);
      });
}

void start_op(const std::shared_ptr<job_data>& d) {
  const auto type = d->req.type;
  d->self->request(d->supervisor, op_timeout, files_atom::value, d->req.session,
                   std::move(d->req.request))
    .then(
      [d, type](files_reply& r) {
        if (!r.error.empty()) {
          d->sink->files_respond(d->id, reply_error(r));
        } else {
          json body = {{"v", 1}, {"path", r.path}};
          if (type == files_http_request::kind::remove) {
            body["removed"] = true;
          } else {
            const json entry = entry_json(r.entry);
            body.update(entry);
          }
          d->sink->files_respond(d->id, json_response(200, body.dump()));
        }
        finish_job(d);
      },
      [d](caf::error& err) {
        d->sink->files_respond(d->id, session_error(err, d->self->system()));
        finish_job(d);
      });
}

caf::behavior job_impl(caf::event_based_actor* self, supervisor_actor supervisor,
                       std::shared_ptr<files_sink> sink, uint64_t id, files_http_request req) {
  auto d = std::make_shared<job_data>();
  d->self = self;
  d->supervisor = std::move(supervisor);
  d->sink = std::move(sink);
  d->id = id;
  d->req = std::move(req);
  // However it ends (its client left: an exit), the download it reads ends
  // with it, and its file is closed.
  self->attach_functor([d] {
    if (d->transfer)
      caf::anon_send_exit(d->transfer, caf::exit_reason::user_shutdown);
  });
  if (d->req.type == files_http_request::kind::get)
    start_get(d);
  else
    start_op(d);
  return {
    [d](written_atom) {
      --d->unwritten;
      pump(d);
    },
  };
}

/// A boolean query parameter: present with no value, "1" or "true".
std::optional<bool> flag_value(std::string_view v) {
  if (v.empty() || v == "1" || v == "true")
    return true;
  if (v == "0" || v == "false")
    return false;
  return std::nullopt;
}

} // namespace

unsigned files_error_status(std::string_view code) {
  if (code == "invalid_path")
    return 400;
  if (code == "escapes_workspace" || code == "permission_denied")
    return 403;
  if (code == "not_found")
    return 404;
  if (code == "too_large")
    return 413;
  if (code == "no_space")
    return 507;
  if (code == "not_a_directory" || code == "is_a_directory" || code == "not_regular" ||
      code == "not_empty" || code == "exists" || code == "changed")
    return 409;
  return 500;
}

std::variant<files_http_request, http_response>
parse_files_request(std::string_view method, std::string session, std::string_view rest,
                    std::string_view query) {
  files_http_request out;
  out.session.id = std::move(session);
  // "/files/a/b": the slash after "files" separates, it is not the path's.
  if (!rest.empty() && rest.front() == '/')
    rest.remove_prefix(1);
  if (!percent_decode(rest, out.request.path))
    return bad(400, "invalid_path", "the path has a bad percent escape");
  if (method == "GET")
    out.type = files_http_request::kind::get;
  else if (method == "PUT")
    out.type = files_http_request::kind::upload;
  else if (method == "DELETE")
    out.type = files_http_request::kind::remove;
  else {
    http_response r = bad(405, "method_not_allowed",
                          std::string(method) + " on a session's files: use GET, PUT or DELETE");
    r.headers.emplace_back("Allow", "GET, PUT, DELETE");
    return r;
  }
  bool mode_given = false;
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view part = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (part.empty())
      continue;
    const auto eq = part.find('=');
    const std::string_view name = part.substr(0, eq);
    const std::string_view value =
        eq == std::string_view::npos ? std::string_view{} : part.substr(eq + 1);
    auto refuse = [&](const std::string& why) {
      return json_response(400, error_body("invalid_request", why, name));
    };
    const bool get = method == "GET", put = method == "PUT", del = method == "DELETE";
    if (name == "mode" && put) {
      uint32_t m = 0;
      if (value.empty() || value.size() > 4)
        return refuse("mode is 1 to 4 octal digits (0644)");
      for (char c : value) {
        if (c < '0' || c > '7')
          return refuse("mode is 1 to 4 octal digits (0644)");
        m = m * 8 + static_cast<uint32_t>(c - '0');
      }
      out.request.mode = m;
      mode_given = true;
      continue;
    }
    auto flag = flag_value(value);
    if (!flag)
      return refuse("'" + std::string(name) + "' is a flag: present, 1, true, 0 or false");
    if (name == "stat" && get) {
      if (*flag)
        out.type = files_http_request::kind::stat;
    } else if (name == "mkdir" && put) {
      if (*flag)
        out.type = files_http_request::kind::mkdir;
    } else if (name == "parents" && put) {
      out.request.parents = *flag;
    } else if (name == "recursive" && del) {
      out.request.recursive = *flag;
    } else {
      return refuse("unknown parameter '" + std::string(name) + "' for " + std::string(method) +
                    " (GET: stat; PUT: mkdir, parents, mode; DELETE: recursive)");
    }
  }
  switch (out.type) {
    case files_http_request::kind::get:
      break;
    case files_http_request::kind::stat:
      out.request.op = files_op::stat;
      break;
    case files_http_request::kind::upload:
      out.request.op = files_op::upload;
      break;
    case files_http_request::kind::mkdir:
      out.request.op = files_op::mkdir;
      if (mode_given)
        return bad(400, "invalid_request", "mode is for files; a directory is made 0755");
      break;
    case files_http_request::kind::remove:
      out.request.op = files_op::remove;
      break;
  }
  return out;
}

caf::actor spawn_files_http_job(caf::actor_system& sys, supervisor_actor supervisor,
                                std::shared_ptr<files_sink> sink, uint64_t request_id,
                                files_http_request req) {
  return sys.spawn(job_impl, std::move(supervisor), std::move(sink), request_id, std::move(req));
}

} // namespace castellan::api
