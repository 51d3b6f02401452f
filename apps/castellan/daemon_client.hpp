#pragma once

/// @file daemon_client.hpp
/// The CLI's side of a running `castellan serve`: one blocking HTTP/1.1
/// connection (Boost.Beast) to `unix:PATH`, `http://HOST:PORT` or
/// `https://HOST:PORT` (TLS with the system's CAs, or the one in
/// CASTELLAN_CA_FILE, and the host name checked), with the bearer token of
/// CASTELLAN_TOKEN when set.

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "ipc/outcome.hpp"

namespace castellan::cli {

/// Where `--connect` (or CASTELLAN_CONNECT) points.
struct daemon_address {
  enum class kind { unix_socket, http, https } scheme = kind::unix_socket;
  std::string path; ///< unix_socket
  std::string host; ///< http, https
  std::string port; ///< http, https

  /// "unix:/run/castellan/castellan.sock", "https://sandbox.example:8443".
  static outcome<daemon_address> parse(const std::string& text);
  std::string describe() const;
};

struct daemon_reply {
  unsigned status = 0;
  std::string content_type;
  std::string body;

  /// The API's error `{"error": {"code", "message"}}`: its code ("" if the
  /// body is not one).
  std::string error_code() const;
  /// Its message, or the status and body when the body is not an API error.
  std::string error_message() const;
};

class daemon_client {
public:
  /// Connects; the failure names the address.
  static outcome<std::unique_ptr<daemon_client>> connect(const daemon_address& where,
                                                         std::string token);
  ~daemon_client();
  daemon_client(const daemon_client&) = delete;
  daemon_client& operator=(const daemon_client&) = delete;

  /// One request and its whole response (keep-alive between them).
  outcome<daemon_reply> request(const std::string& method, const std::string& target,
                                const std::string& body = {});

  /// A request whose answer is a stream (server-sent events, `Accept:
  /// text/event-stream`; `body` is sent with a POST): when the status is
  /// 200, `on_bytes` gets the body as it arrives, piece by piece, until the
  /// server ends it (the reply then has no body) or `on_bytes` returns
  /// false; any other status is returned whole, as request() does.
  outcome<daemon_reply> request_stream(const std::string& method, const std::string& target,
                                       const std::string& body,
                                       const std::function<bool(std::string_view)>& on_bytes);

  /// request_stream() for a GET.
  outcome<daemon_reply> get_stream(const std::string& target,
                                   const std::function<bool(std::string_view)>& on_bytes);

  /// The connection's descriptor (for shutdown(2) from a signal handler);
  /// -1 when not connected.
  int native_handle() const;

  /// Ends the connection from another thread: a request blocked in it
  /// returns a failure. The daemon cancels an exec whose client went away.
  void shut_down();

  struct impl;

private:
  explicit daemon_client(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

/// The address to use: `flag` when given, else CASTELLAN_CONNECT, else "".
std::string connect_target(const std::string& flag);

/// For commands that only a daemon serves: connect_target(flag), else the
/// socket `castellan serve` listens on without --listen
/// (unix:/run/castellan/castellan.sock as root, else
/// unix:$XDG_RUNTIME_DIR/castellan.sock); "" when there is none to name.
std::string daemon_target(const std::string& flag);

} // namespace castellan::cli
