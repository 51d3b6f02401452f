#pragma once

/// @file egress_session.hpp
/// One client connection from a sandbox, served on the proxy's I/O thread:
/// it reads a request head (http_message_parser), decides the destination
/// (resolve, then destination_check on every address), connects only to an
/// address that was checked, and then either tunnels (CONNECT) or forwards
/// absolute-URI requests with keep-alive, re-framing bodies on the way.
/// Everything is asynchronous: a slow or malformed client holds only its own
/// session, and its timers end it.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/steady_timer.hpp>

#include "actors/audit/audit_messages.hpp"
#include "actors/proxy/egress_limits.hpp"
#include "actors/proxy/http_message_parser.hpp"
#include "actors/proxy/splice_pump.hpp"
#include "actors/proxy/worker_link.hpp"

namespace castellan::proxy {

/// Receives one record per decided connection (a tunnel, or one forwarded
/// request) when it ends, on the I/O thread.
using record_sink = std::function<void(connection_record&&)>;

/// Counters shared by every session of one proxy (I/O thread only).
struct egress_counters {
  uint32_t open = 0;
  uint64_t accepted = 0;
  uint64_t denied = 0;
  uint64_t bytes_out = 0;
  uint64_t bytes_in = 0;
};

class egress_session : public std::enable_shared_from_this<egress_session> {
public:
  egress_session(asio::io_context& io, asio::ip::tcp::socket client,
                 std::shared_ptr<worker_link> link, const egress_limits& limits,
                 const record_sink& sink, egress_counters& counters);
  ~egress_session();

  egress_session(const egress_session&) = delete;
  egress_session& operator=(const egress_session&) = delete;

  /// Starts reading the first request head.
  void start();

  /// Closes both sockets; pending operations end and release the session.
  void stop(const std::string& why);

  /// Writes `status` with a one-line body and closes: for connections
  /// refused before a session runs (limits).
  static void refuse(asio::ip::tcp::socket& client, unsigned status, const std::string& line);

private:
  enum class phase : uint8_t { head, deciding, tunnel, request_body, response, answering, closed };

  using self_ptr = std::shared_ptr<egress_session>;

  // -- request head ------------------------------------------------------------
  void read_head();
  void parse_head();
  void on_request_head();
  void begin_record(const std::string& host, uint16_t port);

  // -- destination -------------------------------------------------------------
  void open_destination(std::string host, uint16_t port, std::function<void()> then);
  void decide(const std::vector<policy::ip_address>& addresses, std::function<void()> then);
  void connect(const std::vector<policy::ip_address>& addresses, std::function<void()> then);

  // -- CONNECT -----------------------------------------------------------------
  void start_tunnel();
  void pump(bool outbound);
  void on_pump_done(bool outbound, bool eof, const std::string& why);

  // -- forwarding --------------------------------------------------------------
  void send_request_head();
  void continue_request_body();
  void read_response();
  void parse_response();
  void on_response_head();
  void continue_response_body();
  void finish_exchange();

  // -- common ------------------------------------------------------------------
  void fail(unsigned status, const std::string& line);
  void write_client(std::string data, std::function<void()> then);
  void write_upstream(std::string data, std::function<void()> then);
  bool charge(uint64_t n, bool outbound);
  void arm_deadline(std::chrono::milliseconds d);
  void arm_idle();
  void on_timer();
  void emit_record(const std::string& how);
  void close_upstream();

  asio::io_context& io_;
  asio::ip::tcp::socket client_;
  asio::ip::tcp::socket upstream_;
  asio::ip::tcp::resolver resolver_;
  asio::steady_timer timer_;
  std::shared_ptr<worker_link> link_;
  const egress_limits& limits_;
  const record_sink& sink_;
  egress_counters& counters_;

  phase phase_ = phase::head;
  http_message_parser request_;
  http_message_parser response_;
  std::vector<char> in_;  ///< client → proxy
  std::size_t in_begin_ = 0;
  std::size_t in_end_ = 0;
  std::vector<char> up_;  ///< upstream → proxy
  std::size_t up_begin_ = 0;
  std::size_t up_end_ = 0;

  // Tunnel state: splice pumps (kernel-side copies), or buffer copies
  // through in_/up_ when no pipe could be created.
  std::unique_ptr<splice_pump> outbound_pump_;
  std::unique_ptr<splice_pump> inbound_pump_;
  bool outbound_done_ = false;
  bool inbound_done_ = false;

  // Forwarding state: the open upstream connection and its decision.
  bool upstream_open_ = false;
  std::string upstream_host_;
  uint16_t upstream_port_ = 0;
  std::string upstream_address_;
  std::string upstream_decision_;
  std::string upstream_rule_;
  std::string upstream_reason_;
  bool request_chunked_ = false;
  bool response_chunked_out_ = false;
  bool client_keep_alive_ = false;
  bool head_request_ = false;

  // The record of the current tunnel or request.
  bool record_open_ = false;
  connection_record record_;
  std::chrono::steady_clock::time_point record_start_;
  std::string host_; ///< normalised host of the current destination
  uint16_t port_ = 0;

  std::chrono::steady_clock::time_point last_activity_;
  std::chrono::milliseconds idle_{0};
  bool idle_mode_ = false;
  bool registered_ = false;
};

} // namespace castellan::proxy
