#pragma once

/// @file session_files_routes.hpp
/// The files of a session's workspace over HTTP (docs/api.md, "Session
/// files"):
///
///   PUT    /v1/sessions/{id}/files/{path}            the body becomes the file
///   PUT    /v1/sessions/{id}/files/{path}?mkdir      a directory
///   GET    /v1/sessions/{id}/files/{path}            a file's bytes (streamed), or a
///                                                    directory's listing (JSON)
///   GET    /v1/sessions/{id}/files/{path}?stat       the entry itself (JSON)
///   DELETE /v1/sessions/{id}/files/{path}            a file, symlink or empty directory
///                                                    (?recursive: any directory)
///
/// `{path}` is relative to /workspace (percent-decoded; empty: /workspace
/// itself). The request is parsed on the I/O thread (parse_files_request)
/// and carried out by an actor of its own (spawn_files_http_job), which
/// asks the supervisor and, for a download, reads the file from the
/// session's transfer actor one chunk at a time, handing the next chunk to
/// the server only once the one before was written to the socket: a slow
/// client holds at most two chunks (2 MiB) of the daemon's memory.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

#include "actors/api/http_server.hpp"
#include "actors/session/session_files_messages.hpp"
#include "actors/supervisor/supervisor_actor.hpp"

namespace castellan::api {

/// A files request as the route decided it.
struct files_http_request {
  enum class kind : uint8_t { get, stat, upload, mkdir, remove };
  kind type = kind::get;
  /// The session: its id, and its owner as the API's registry has it (the
  /// supervisor checks it again).
  session_ref session;
  files_request request;
};

/// Parses a files route: `method`, the part of the path after
/// `/v1/sessions/{id}/files` ("" or "/…", percent-encoded) and the query
/// string. An error response (400 invalid_path or invalid_request naming
/// the parameter, 405) when it is not a files request.
std::variant<files_http_request, http_response>
parse_files_request(std::string_view method, std::string session, std::string_view rest,
                    std::string_view query);

/// The HTTP status of a files error code (files_reply::error).
unsigned files_error_status(std::string_view code);

/// Where a files job's answer goes: the API's server, for the request.
/// Called from the job's thread: must not block.
class files_sink {
public:
  virtual ~files_sink() = default;
  virtual void files_respond(uint64_t request_id, http_response response) = 0;
  /// The head of a download: 200, its Content-Length and type.
  virtual void files_head(uint64_t request_id, uint64_t size) = 0;
  /// A piece of it; `on_written` runs once the socket took it.
  virtual void files_piece(uint64_t request_id, std::string bytes,
                           std::function<void()> on_written) = 0;
  /// Its end: after the whole file, or (cut short) after an error, when
  /// the client sees fewer bytes than the Content-Length promised.
  virtual void files_finish(uint64_t request_id) = 0;
};

/// Spawns the actor that carries out `req` for request `request_id`: it
/// answers through `sink` and quits (an exit stops it, and the download it
/// reads, when the client leaves).
caf::actor spawn_files_http_job(caf::actor_system& sys, supervisor_actor supervisor,
                                std::shared_ptr<files_sink> sink, uint64_t request_id,
                                files_http_request req);

} // namespace castellan::api
