#pragma once

/// @file http_server.hpp
/// The daemon's HTTP/1.1 server (Boost.Beast): unix-socket, loopback TCP
/// and TLS listeners on one io_context thread, keep-alive, header and body limits,
/// a read timeout, a connection limit. It knows nothing of castellan's API:
/// each parsed request goes to a callback on the I/O thread, which must not
/// block; the answer comes back later, from any thread, through respond().

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "actors/api/listen_address.hpp"
#include "actors/api/tls_settings.hpp"
#include "ipc/outcome.hpp"

namespace castellan::api {

/// The server's limits: what a client may cost it.
struct http_limits {
  std::size_t header_bytes = 16 * 1024;     ///< request line and headers; beyond: 431
  std::size_t body_bytes = 4 * 1024 * 1024; ///< the body; beyond: 413
  /// The body of a request callbacks::body_limit lets have more than
  /// body_bytes (a file uploaded into a session's workspace): at most this.
  std::size_t upload_bytes = 256u * 1024 * 1024;
  /// The whole of one request (headers and body) must arrive within this,
  /// and so must the first byte of the next one on a kept-alive connection;
  /// a response must be taken by the client within it too. Beyond: closed.
  std::chrono::milliseconds read_timeout{10000};
  /// Connections open at once; one more is answered 503 and closed.
  std::size_t max_connections = 1024;
};

/// Who may connect to the unix sockets: the file's mode and group, set
/// between bind and listen.
struct unix_socket_access {
  uint32_t mode = 0600; ///< 0600 (the daemon's user) or 0660 (and the group)
  int64_t gid = -1;     ///< the socket's group; -1: the daemon's
};

/// One request, as the callback gets it.
struct http_request {
  uint64_t id = 0;    ///< what respond() is called with
  std::string method; ///< "GET", "POST", …
  std::string target; ///< the path, query string included
  std::string content_type;
  std::string host; ///< the Host header
  std::string accept; ///< the Accept header
  /// The Authorization header: a secret, never to be logged or echoed.
  std::string authorization;
  std::string body;
  bool tcp = false; ///< arrived on a TCP listener (else a unix socket)
  bool tls = false; ///< over TLS (a `tls:` listener)
  /// Who connected: "unix uid=U gid=G pid=P" (from the kernel, at connect)
  /// or "tcp ADDR:PORT".
  std::string peer;
};

struct http_response {
  unsigned status = 200;
  std::string content_type = "application/json";
  std::string body;
  /// Extra headers (name, value), e.g. Allow on a 405.
  std::vector<std::pair<std::string, std::string>> headers;
};

class http_server {
public:
  struct callbacks {
    /// A parsed request. Runs on the I/O thread: must not block.
    std::function<void(http_request)> on_request;
    /// The client of request `id` went away before its response: it will
    /// never be written. Runs on the I/O thread.
    std::function<void(uint64_t)> on_abandoned;
    /// Once a request's head is read (`id` and `body` unset): whether its
    /// body may have up to limits.upload_bytes instead of body_bytes. Runs
    /// on the I/O thread; unset: no request may.
    std::function<bool(const http_request&)> large_body;
  };

  /// Binds every listener (a unix socket: mode and group as `access` says,
  /// 0600 by default, after checking that no server answers on a socket
  /// already there, which is then removed; plain TCP: loopback addresses
  /// only; TLS: any address, presenting `tls`, which a TLS listener needs)
  /// and starts the I/O thread. A TLS connection's handshake counts against
  /// the read timeout of its first request.
  static outcome<std::unique_ptr<http_server>> start(const std::vector<listen_address>& where,
                                                     http_limits limits, callbacks cb,
                                                     unix_socket_access access = {},
                                                     const tls_files& tls = {});

  /// Stops (see stop()).
  ~http_server();

  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  /// Writes the response to request `id`, if its client is still there.
  /// Thread-safe: the write happens on the I/O thread.
  void respond(uint64_t id, http_response response);

  /// Starts a streamed response to request `id` (server-sent events): the
  /// status line and headers now, without a length, then the body as
  /// stream() hands it over; end_stream() closes the connection after the
  /// last piece. Until then the request is pending: a client that goes
  /// away has it abandoned (on_abandoned). A client that leaves more than
  /// 16 MiB untaken, or takes no piece within the read timeout, is closed.
  /// Thread-safe; calls for one request are carried out in order.
  /// `headers` go with the head (a Content-Length among them makes a
  /// response whose end the client can check, though the connection still
  /// closes after it).
  void respond_stream(uint64_t id, unsigned status, std::string content_type,
                      std::vector<std::pair<std::string, std::string>> headers = {});
  /// `on_written`, if given, runs on the I/O thread once these bytes are
  /// handed to the socket (never if the connection closes first): what a
  /// producer paces itself by.
  void stream(uint64_t id, std::string bytes, std::function<void()> on_written = {});
  void end_stream(uint64_t id);

  /// Runs `fn` on the I/O thread (the thread the callbacks run on).
  void post(std::function<void()> fn);

  /// The listeners as bound (a TCP port 0 replaced by the kernel's choice).
  const std::vector<listen_address>& bound() const;

  /// Open connections, as last counted on the I/O thread.
  std::size_t connections() const;

  /// Closes the listeners and every connection (a response already handed
  /// to respond() is written first, within the read timeout), joins the I/O
  /// thread and removes the unix sockets it created (if they are still its
  /// own). Idempotent.
  void stop();

  struct impl;

private:
  explicit http_server(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

} // namespace castellan::api
