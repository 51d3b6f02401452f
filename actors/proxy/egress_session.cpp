/// @file egress_session.cpp
/// See egress_session.hpp.

#include "actors/proxy/egress_session.hpp"

#include <http_parser.h>

#include <chrono>
#include <cstdio>

#include <asio/connect.hpp>
#include <asio/write.hpp>

#include "actors/policy/engine/host_pattern.hpp"
#include "actors/proxy/destination_check.hpp"

namespace castellan::proxy {

namespace {

using clock_type = std::chrono::steady_clock;

const char* status_text(unsigned status) {
  switch (status) {
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 408: return "Request Timeout";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Error";
  }
}

std::string error_response(unsigned status, const std::string& line) {
  std::string body = "castellan egress: " + line + "\n";
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + status_text(status) + "\r\n";
  out += "Content-Type: text/plain; charset=utf-8\r\n";
  out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  out += "Connection: close\r\n\r\n";
  out += body;
  return out;
}

/// Hop-by-hop headers (RFC 9110 §7.6.1) and the framing headers the proxy
/// writes itself.
bool hop_by_hop(const std::string& name, const http_head& h) {
  for (const char* n : {"connection", "keep-alive", "proxy-connection", "proxy-authorization",
                        "proxy-authenticate", "te", "trailer", "transfer-encoding", "upgrade",
                        "content-length", "host"})
    if (iequals(name, n))
      return true;
  // Headers the sender named in Connection are hop-by-hop too.
  for (const auto& [k, v] : h.headers) {
    if (!iequals(k, "connection"))
      continue;
    std::size_t pos = 0;
    while (pos <= v.size()) {
      std::size_t comma = v.find(',', pos);
      if (comma == std::string::npos)
        comma = v.size();
      std::size_t b = pos, e = comma;
      while (b < e && (v[b] == ' ' || v[b] == '\t'))
        ++b;
      while (e > b && (v[e - 1] == ' ' || v[e - 1] == '\t'))
        --e;
      if (e > b && iequals(std::string_view(v).substr(b, e - b), name))
        return true;
      pos = comma + 1;
    }
  }
  return false;
}

/// "host:port" of a CONNECT target ("[v6]:port" for IPv6).
bool split_authority(const std::string& target, std::string& host, uint16_t& port) {
  const auto colon = target.rfind(':');
  if (colon == std::string::npos || colon + 1 >= target.size())
    return false;
  host = target.substr(0, colon);
  const std::string p = target.substr(colon + 1);
  if (p.size() > 5)
    return false;
  unsigned value = 0;
  for (char c : p) {
    if (c < '0' || c > '9')
      return false;
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  if (value == 0 || value > 65535)
    return false;
  port = static_cast<uint16_t>(value);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return !host.empty();
}

std::string chunk(const std::string& data) {
  char size[24];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  std::string out = size;
  out += data;
  out += "\r\n";
  return out;
}

policy::ip_address to_ip(const asio::ip::address& a) {
  policy::ip_address out;
  if (a.is_v4()) {
    out.family = policy::ip_family::v4;
    const auto b = a.to_v4().to_bytes();
    for (std::size_t i = 0; i < 4; ++i)
      out.bytes[i] = b[i];
    return out;
  }
  const auto v6 = a.to_v6();
  if (v6.is_v4_mapped())
    return to_ip(asio::ip::make_address_v4(asio::ip::v4_mapped, v6));
  out.family = policy::ip_family::v6;
  const auto b = v6.to_bytes();
  for (std::size_t i = 0; i < 16; ++i)
    out.bytes[i] = b[i];
  return out;
}

asio::ip::address to_asio(const policy::ip_address& a) {
  if (a.family == policy::ip_family::v4)
    return asio::ip::address_v4(asio::ip::address_v4::bytes_type{a.bytes[0], a.bytes[1],
                                                                 a.bytes[2], a.bytes[3]});
  asio::ip::address_v6::bytes_type b;
  for (std::size_t i = 0; i < 16; ++i)
    b[i] = a.bytes[i];
  return asio::ip::address_v6(b);
}

} // namespace

egress_session::egress_session(asio::io_context& io, asio::ip::tcp::socket client,
                               std::shared_ptr<worker_link> link, const egress_limits& limits,
                               const record_sink& sink, egress_counters& counters)
  : io_(io),
    client_(std::move(client)),
    upstream_(io),
    resolver_(io),
    timer_(io),
    link_(std::move(link)),
    limits_(limits),
    sink_(sink),
    counters_(counters),
    request_(http_message_parser::kind::request, limits.max_head_bytes),
    response_(http_message_parser::kind::response, limits.max_head_bytes),
    in_(limits.buffer_bytes),
    up_(limits.buffer_bytes) {
  ++link_->open_connections;
  link_->sessions.insert(this);
  ++counters_.open;
  ++counters_.accepted;
  registered_ = true;
}

egress_session::~egress_session() {
  if (registered_) {
    --link_->open_connections;
    link_->sessions.erase(this);
    --counters_.open;
  }
}

void egress_session::refuse(asio::ip::tcp::socket& client, unsigned status,
                            const std::string& line) {
  const std::string text = error_response(status, line);
  asio::error_code ec;
  client.non_blocking(true, ec);
  // Best effort: a refused client gets what fits in its socket buffer now.
  client.write_some(asio::buffer(text), ec);
  client.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
  client.close(ec);
}

void egress_session::start() {
  asio::error_code ec;
  client_.set_option(asio::ip::tcp::no_delay(true), ec);
  last_activity_ = clock_type::now();
  read_head();
}

void egress_session::stop(const std::string& why) {
  if (phase_ == phase::closed)
    return;
  phase_ = phase::closed;
  if (record_open_)
    emit_record(why);
  asio::error_code ec;
  timer_.cancel();
  resolver_.cancel();
  client_.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
  client_.close(ec);
  upstream_.close(ec);
  upstream_open_ = false;
}

// -- timers --------------------------------------------------------------------

void egress_session::arm_deadline(std::chrono::milliseconds d) {
  idle_mode_ = false;
  timer_.expires_after(d);
  timer_.async_wait([self = shared_from_this()](const asio::error_code& ec) {
    if (!ec)
      self->on_timer();
  });
}

void egress_session::arm_idle() {
  idle_mode_ = true;
  idle_ = limits_.idle_timeout;
  last_activity_ = clock_type::now();
  timer_.expires_after(idle_);
  timer_.async_wait([self = shared_from_this()](const asio::error_code& ec) {
    if (!ec)
      self->on_timer();
  });
}

void egress_session::on_timer() {
  if (phase_ == phase::closed)
    return;
  if (idle_mode_) {
    const auto quiet = clock_type::now() - last_activity_;
    if (quiet < idle_) {
      // Activity since the timer was set: wait for the rest of the period.
      timer_.expires_after(std::chrono::duration_cast<std::chrono::milliseconds>(idle_ - quiet) +
                           std::chrono::milliseconds(1));
      timer_.async_wait([self = shared_from_this()](const asio::error_code& ec) {
        if (!ec)
          self->on_timer();
      });
      return;
    }
    stop("idle for " + std::to_string(idle_.count()) + " ms");
    return;
  }
  switch (phase_) {
    case phase::head:
      if (request_.head_bytes() == 0 && in_begin_ == in_end_)
        stop("no request within " + std::to_string(limits_.head_timeout.count()) + " ms");
      else
        fail(408, "the request head did not arrive within " +
                    std::to_string(limits_.head_timeout.count()) + " ms");
      return;
    case phase::deciding:
      fail(504, "resolving and connecting to " + host_ + ":" + std::to_string(port_) +
                  " took longer than " + std::to_string(limits_.connect_timeout.count()) + " ms");
      return;
    default:
      return;
  }
}

// -- request head ----------------------------------------------------------------

void egress_session::read_head() {
  phase_ = phase::head;
  request_.reset();
  arm_deadline(limits_.head_timeout);
  parse_head();
}

void egress_session::parse_head() {
  while (in_begin_ < in_end_) {
    const std::size_t n = request_.feed(in_.data() + in_begin_, in_end_ - in_begin_);
    in_begin_ += n;
    if (request_.failed()) {
      fail(request_.error_status(), "malformed request: " + request_.error());
      return;
    }
    if (request_.head_complete()) {
      on_request_head();
      return;
    }
    if (n == 0)
      break;
  }
  in_begin_ = in_end_ = 0; // everything was consumed by the parser
  client_.async_read_some(asio::buffer(in_.data(), in_.size()),
                          [self = shared_from_this()](const asio::error_code& ec, std::size_t n) {
                            if (self->phase_ == phase::closed)
                              return;
                            if (ec) {
                              self->stop(self->request_.head_bytes() == 0
                                           ? "closed by the client"
                                           : "the client closed in the middle of a request head");
                              return;
                            }
                            self->in_end_ = n;
                            self->parse_head();
                          });
}

void egress_session::begin_record(const std::string& host, uint16_t port) {
  record_ = connection_record{};
  record_.exec_id = link_->exec_now();
  record_.pool = link_->pool;
  record_.worker_id = link_->worker_id;
  record_.host = host;
  record_.port = port;
  record_.method = request_.head().method;
  record_.timestamp_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  record_start_ = clock_type::now();
  record_open_ = true;
}

void egress_session::on_request_head() {
  phase_ = phase::deciding;
  timer_.cancel();
  const http_head& h = request_.head();
  if (h.upgrade) { // CONNECT
    std::string host;
    uint16_t port = 0;
    if (!split_authority(h.target, host, port)) {
      fail(400, "CONNECT needs host:port, got '" + h.target.substr(0, 200) + "'");
      return;
    }
    close_upstream();
    open_destination(std::move(host), port, [this] { start_tunnel(); });
    return;
  }
  http_parser_url url;
  http_parser_url_init(&url);
  if (http_parser_parse_url(h.target.data(), h.target.size(), 0, &url) != 0 ||
      (url.field_set & (1u << UF_SCHEMA)) == 0 || (url.field_set & (1u << UF_HOST)) == 0) {
    fail(400, "the proxy forwards absolute-URI requests (http://host/path) and CONNECT; got '" +
                h.target.substr(0, 200) + "'");
    return;
  }
  auto field = [&](http_parser_url_fields f) {
    return h.target.substr(url.field_data[f].off, url.field_data[f].len);
  };
  if (!iequals(field(UF_SCHEMA), "http")) {
    fail(400, "scheme '" + field(UF_SCHEMA) + "' is not forwarded; https goes through CONNECT");
    return;
  }
  std::string host = field(UF_HOST);
  const uint16_t port = (url.field_set & (1u << UF_PORT)) != 0 ? url.port : 80;
  if (port == 0) {
    fail(400, "port 0 in '" + h.target.substr(0, 200) + "'");
    return;
  }
  if (upstream_open_ && policy::normalize_host(host) == upstream_host_ &&
      port == upstream_port_) {
    // Keep-alive to the same destination: the decision and the address it
    // allowed still hold.
    host_ = upstream_host_;
    port_ = port;
    begin_record(host_, port_);
    record_.address = upstream_address_;
    record_.decision = upstream_decision_;
    record_.rule = upstream_rule_;
    record_.reason = upstream_reason_;
    if (link_->over_budget(limits_.bytes_per_exec)) {
      fail(403, "the exec's egress byte budget (" + std::to_string(limits_.bytes_per_exec) +
                  " bytes) is used up");
      return;
    }
    send_request_head();
    return;
  }
  close_upstream();
  open_destination(std::move(host), port, [this] { send_request_head(); });
}

// -- destination -------------------------------------------------------------------

void egress_session::open_destination(std::string host, uint16_t port,
                                      std::function<void()> then) {
  host_ = policy::normalize_host(host);
  port_ = port;
  begin_record(host_, port);
  if (link_->over_budget(limits_.bytes_per_exec)) {
    record_.decision = "deny";
    record_.rule = "limit";
    fail(403, "the exec's egress byte budget (" + std::to_string(limits_.bytes_per_exec) +
                " bytes) is used up");
    return;
  }
  if (auto literal = policy::parse_ip(host_)) {
    decide({*literal}, std::move(then));
    return;
  }
  if (host_.find('*') != std::string::npos || policy::check_host_pattern(host_).has_value()) {
    record_.decision = "deny";
    record_.rule = "invalid";
    fail(400, "'" + host_.substr(0, 200) + "' is not a valid host name");
    return;
  }
  if (auto denied = check_host_name(*link_->policy, host_, port_)) {
    record_.decision = "deny";
    record_.rule = denied->rule;
    record_.reason = denied->reason;
    ++counters_.denied;
    fail(403, denied->reason);
    return;
  }
  arm_deadline(limits_.connect_timeout);
  resolver_.async_resolve(
    host_, std::to_string(port), asio::ip::resolver_base::numeric_service,
    [self = shared_from_this(), then = std::move(then)](
      const asio::error_code& ec, asio::ip::tcp::resolver::results_type results) mutable {
      if (self->phase_ == phase::closed)
        return;
      if (ec) {
        self->record_.decision = "deny";
        self->record_.rule = "resolve";
        self->fail(502, "cannot resolve " + self->host_ + ": " + ec.message());
        return;
      }
      std::vector<policy::ip_address> addresses;
      for (const auto& entry : results)
        addresses.push_back(to_ip(entry.endpoint().address()));
      self->decide(addresses, std::move(then));
    });
}

void egress_session::decide(const std::vector<policy::ip_address>& addresses,
                            std::function<void()> then) {
  const destination_verdict v = check_destination(*link_->policy, host_, port_, addresses);
  record_.address = v.address;
  record_.decision = std::string(policy::to_string(v.verdict));
  record_.rule = v.rule;
  record_.reason = v.reason;
  if (v.verdict == policy::action::deny) {
    ++counters_.denied;
    fail(403, v.reason);
    return;
  }
  upstream_address_ = v.address;
  upstream_decision_ = record_.decision;
  upstream_rule_ = v.rule;
  upstream_reason_ = v.reason;
  connect(v.allowed, std::move(then));
}

void egress_session::connect(const std::vector<policy::ip_address>& addresses,
                             std::function<void()> then) {
  // Only the addresses that were checked: no second resolution happens.
  std::vector<asio::ip::tcp::endpoint> endpoints;
  endpoints.reserve(addresses.size());
  for (const auto& a : addresses)
    endpoints.emplace_back(to_asio(a), port_);
  arm_deadline(limits_.connect_timeout);
  asio::async_connect(
    upstream_, endpoints,
    [self = shared_from_this(), then = std::move(then)](const asio::error_code& ec,
                                                        const asio::ip::tcp::endpoint& ep) {
      if (self->phase_ == phase::closed)
        return;
      self->timer_.cancel();
      if (ec) {
        self->fail(502, "connect to " + self->host_ + ":" + std::to_string(self->port_) +
                          " failed: " + ec.message());
        return;
      }
      asio::error_code ignored;
      self->upstream_.set_option(asio::ip::tcp::no_delay(true), ignored);
      self->record_.address = ep.address().to_string();
      self->upstream_address_ = self->record_.address;
      self->upstream_open_ = true;
      self->upstream_host_ = self->host_;
      self->upstream_port_ = self->port_;
      then();
    });
}

// -- CONNECT ---------------------------------------------------------------------

void egress_session::start_tunnel() {
  phase_ = phase::tunnel;
  // Bytes the client sent after its CONNECT head (a TLS ClientHello sent
  // early) are the tunnel's first outbound bytes. The parser consumed the
  // head's last line end when it completed the CONNECT message.
  while (!request_.message_complete() && in_begin_ < in_end_) {
    const std::size_t n = request_.feed(in_.data() + in_begin_, in_end_ - in_begin_);
    in_begin_ += n;
    if (n == 0)
      break;
  }
  std::string early(in_.data() + in_begin_, in_end_ - in_begin_);
  in_begin_ = in_end_ = 0;
  arm_idle();
  write_client("HTTP/1.1 200 Connection established\r\n\r\n", [this, early = std::move(early)] {
    auto start_pumps = [this] {
      outbound_pump_ = std::make_unique<splice_pump>(client_, upstream_);
      inbound_pump_ = std::make_unique<splice_pump>(upstream_, client_);
      if (outbound_pump_->open() && inbound_pump_->open()) {
        for (bool outbound : {true, false}) {
          auto& p = outbound ? outbound_pump_ : inbound_pump_;
          p->start(
            shared_from_this(), [this, outbound](std::size_t n) { return charge(n, outbound); },
            [this, outbound](bool eof, const std::string& why) {
              on_pump_done(outbound, eof, why);
            });
        }
        return;
      }
      // Out of fds for pipes: copy through the buffers instead.
      outbound_pump_.reset();
      inbound_pump_.reset();
      pump(true);
      pump(false);
    };
    if (early.empty()) {
      start_pumps();
      return;
    }
    if (!charge(early.size(), true))
      return;
    write_upstream(early, start_pumps);
  });
}

void egress_session::pump(bool outbound) {
  auto& from = outbound ? client_ : upstream_;
  auto& buf = outbound ? in_ : up_;
  from.async_read_some(
    asio::buffer(buf.data(), buf.size()),
    [self = shared_from_this(), outbound](const asio::error_code& ec, std::size_t n) {
      if (self->phase_ == phase::closed)
        return;
      auto& to = outbound ? self->upstream_ : self->client_;
      if (ec) {
        if (ec != asio::error::eof) {
          self->stop(outbound ? "client error: " + ec.message() : "server error: " + ec.message());
          return;
        }
        // Half close: pass the end on and keep the other direction going.
        asio::error_code ignored;
        to.shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
        (outbound ? self->outbound_done_ : self->inbound_done_) = true;
        if (self->outbound_done_ && self->inbound_done_)
          self->stop("closed by both ends");
        return;
      }
      if (!self->charge(n, outbound))
        return;
      auto& buf2 = outbound ? self->in_ : self->up_;
      asio::async_write(to, asio::buffer(buf2.data(), n),
                        [self, outbound](const asio::error_code& wec, std::size_t) {
                          if (self->phase_ == phase::closed)
                            return;
                          if (wec) {
                            self->stop((outbound ? "server" : "client") +
                                       std::string(" stopped reading: ") + wec.message());
                            return;
                          }
                          self->pump(outbound);
                        });
    });
}

void egress_session::on_pump_done(bool outbound, bool eof, const std::string& why) {
  if (phase_ == phase::closed)
    return;
  if (!eof) {
    stop(why);
    return;
  }
  // Half close: pass the end on and keep the other direction going.
  asio::error_code ignored;
  (outbound ? upstream_ : client_).shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
  (outbound ? outbound_done_ : inbound_done_) = true;
  if (outbound_done_ && inbound_done_)
    stop("closed by both ends");
}

// -- forwarding ------------------------------------------------------------------

void egress_session::send_request_head() {
  phase_ = phase::request_body;
  const http_head& h = request_.head();
  http_parser_url url;
  http_parser_url_init(&url);
  http_parser_parse_url(h.target.data(), h.target.size(), 0, &url);
  std::string path = (url.field_set & (1u << UF_PATH)) != 0
                       ? h.target.substr(url.field_data[UF_PATH].off, url.field_data[UF_PATH].len)
                       : std::string("/");
  if ((url.field_set & (1u << UF_QUERY)) != 0)
    path += "?" + h.target.substr(url.field_data[UF_QUERY].off, url.field_data[UF_QUERY].len);
  std::string host = h.target.substr(url.field_data[UF_HOST].off, url.field_data[UF_HOST].len);
  if (host.find(':') != std::string::npos)
    host = "[" + host + "]"; // an IPv6 literal
  std::string out = h.method + " " + path + " HTTP/1.1\r\nHost: " + host;
  if ((url.field_set & (1u << UF_PORT)) != 0)
    out += ":" + std::to_string(url.port);
  out += "\r\n";
  // "Expect: 100-continue" is answered here: the client may send its body
  // at once, and the server never waits for a body the proxy holds back.
  bool expects_continue = false;
  for (const auto& [k, v] : h.headers) {
    if (iequals(k, "expect") && iequals(v, "100-continue")) {
      expects_continue = true;
      continue;
    }
    if (!hop_by_hop(k, h))
      out += k + ": " + v + "\r\n";
  }
  const bool has_body = h.chunked || (h.content_length && *h.content_length > 0);
  request_chunked_ = h.chunked;
  if (h.chunked)
    out += "Transfer-Encoding: chunked\r\n";
  else if (h.content_length)
    out += "Content-Length: " + std::to_string(*h.content_length) + "\r\n";
  out += "\r\n";
  client_keep_alive_ = h.keep_alive;
  head_request_ = h.method == "HEAD";
  if (!charge(out.size(), true))
    return;
  arm_idle();
  write_upstream(std::move(out), [this, go_ahead = expects_continue && has_body] {
    if (go_ahead)
      write_client("HTTP/1.1 100 Continue\r\n\r\n", [this] { continue_request_body(); });
    else
      continue_request_body();
  });
}

void egress_session::continue_request_body() {
  // Parse what is buffered; the body comes out de-framed in request_.body().
  while (!request_.message_complete() && in_begin_ < in_end_ && request_.body().size() <
                                                                    limits_.buffer_bytes) {
    const std::size_t n = request_.feed(in_.data() + in_begin_, in_end_ - in_begin_);
    in_begin_ += n;
    if (request_.failed()) {
      stop("malformed request body: " + request_.error());
      return;
    }
    if (n == 0)
      break;
  }
  if (!request_.body().empty()) {
    std::string data = std::move(request_.body());
    request_.body().clear();
    if (!charge(data.size(), true))
      return;
    write_upstream(request_chunked_ ? chunk(data) : std::move(data),
                   [this] { continue_request_body(); });
    return;
  }
  if (request_.message_complete()) {
    if (request_chunked_) {
      request_chunked_ = false;
      write_upstream("0\r\n\r\n", [this] { read_response(); });
      return;
    }
    read_response();
    return;
  }
  in_begin_ = in_end_ = 0;
  client_.async_read_some(asio::buffer(in_.data(), in_.size()),
                          [self = shared_from_this()](const asio::error_code& ec, std::size_t n) {
                            if (self->phase_ == phase::closed)
                              return;
                            if (ec) {
                              self->stop("the client closed in the middle of a request body");
                              return;
                            }
                            self->last_activity_ = clock_type::now();
                            self->in_end_ = n;
                            self->continue_request_body();
                          });
}

void egress_session::read_response() {
  phase_ = phase::response;
  response_.reset();
  response_.expect_no_body(head_request_);
  parse_response();
}

void egress_session::parse_response() {
  while (up_begin_ < up_end_) {
    const std::size_t n = response_.feed(up_.data() + up_begin_, up_end_ - up_begin_);
    up_begin_ += n;
    if (response_.failed()) {
      fail(502, "malformed response from " + host_ + ": " + response_.error());
      return;
    }
    if (response_.head_complete()) {
      on_response_head();
      return;
    }
    if (n == 0)
      break;
  }
  up_begin_ = up_end_ = 0;
  upstream_.async_read_some(asio::buffer(up_.data(), up_.size()),
                            [self = shared_from_this()](const asio::error_code& ec, std::size_t n) {
                              if (self->phase_ == phase::closed)
                                return;
                              if (ec) {
                                self->fail(502, self->host_ +
                                                  " closed the connection before a response");
                                return;
                              }
                              self->last_activity_ = clock_type::now();
                              self->up_end_ = n;
                              self->parse_response();
                            });
}

void egress_session::on_response_head() {
  const http_head& h = response_.head();
  std::string out = "HTTP/1.1 " + std::to_string(h.status) + " " + h.reason + "\r\n";
  for (const auto& [k, v] : h.headers)
    if (!hop_by_hop(k, h))
      out += k + ": " + v + "\r\n";
  if (h.status / 100 == 1) {
    // An interim response (100 Continue): pass it on and read the final one.
    out += "\r\n";
    if (!charge(out.size(), false))
      return;
    write_client(std::move(out), [this] {
      // Resume the parser past the interim head, then start a new message.
      while (!response_.message_complete() && up_begin_ < up_end_) {
        const std::size_t n = response_.feed(up_.data() + up_begin_, up_end_ - up_begin_);
        up_begin_ += n;
        if (n == 0)
          break;
      }
      read_response();
    });
    return;
  }
  const bool no_body = head_request_ || h.status == 204 || h.status == 304;
  response_chunked_out_ = false;
  if (h.content_length && !h.chunked)
    out += "Content-Length: " + std::to_string(*h.content_length) + "\r\n";
  else if (!no_body) {
    out += "Transfer-Encoding: chunked\r\n";
    response_chunked_out_ = true;
  }
  if (!client_keep_alive_)
    out += "Connection: close\r\n";
  out += "\r\n";
  if (!charge(out.size(), false))
    return;
  write_client(std::move(out), [this] { continue_response_body(); });
}

void egress_session::continue_response_body() {
  while (!response_.message_complete() && up_begin_ < up_end_ &&
         response_.body().size() < limits_.buffer_bytes) {
    const std::size_t n = response_.feed(up_.data() + up_begin_, up_end_ - up_begin_);
    up_begin_ += n;
    if (response_.failed()) {
      stop("malformed response body from " + host_ + ": " + response_.error());
      return;
    }
    if (n == 0)
      break;
  }
  if (!response_.body().empty()) {
    std::string data = std::move(response_.body());
    response_.body().clear();
    if (!charge(data.size(), false))
      return;
    write_client(response_chunked_out_ ? chunk(data) : std::move(data),
                 [this] { continue_response_body(); });
    return;
  }
  if (response_.message_complete()) {
    if (response_chunked_out_) {
      response_chunked_out_ = false;
      write_client("0\r\n\r\n", [this] { finish_exchange(); });
      return;
    }
    finish_exchange();
    return;
  }
  up_begin_ = up_end_ = 0;
  upstream_.async_read_some(
    asio::buffer(up_.data(), up_.size()),
    [self = shared_from_this()](const asio::error_code& ec, std::size_t n) {
      if (self->phase_ == phase::closed)
        return;
      if (ec) {
        // The end of a body that runs until close, or a truncated one.
        self->response_.finish();
        if (!self->response_.message_complete()) {
          self->stop("response from " + self->host_ + " truncated: " + self->response_.error());
          return;
        }
        self->close_upstream();
        self->continue_response_body();
        return;
      }
      self->last_activity_ = clock_type::now();
      self->up_end_ = n;
      self->continue_response_body();
    });
}

void egress_session::finish_exchange() {
  const http_head& h = response_.head();
  emit_record("completed " + std::to_string(h.status));
  if (!h.keep_alive || h.body_until_close)
    close_upstream();
  if (!client_keep_alive_) {
    stop("completed");
    return;
  }
  read_head();
}

// -- common ----------------------------------------------------------------------

bool egress_session::charge(uint64_t n, bool outbound) {
  last_activity_ = clock_type::now();
  (outbound ? record_.bytes_out : record_.bytes_in) += n;
  (outbound ? counters_.bytes_out : counters_.bytes_in) += n;
  if (link_->charge(n, limits_.bytes_per_exec))
    return true;
  record_.reason += "; the exec's egress byte budget (" +
                    std::to_string(limits_.bytes_per_exec) + " bytes) was exceeded";
  stop("closed: byte budget exceeded");
  return false;
}

void egress_session::write_client(std::string data, std::function<void()> then) {
  auto buf = std::make_shared<std::string>(std::move(data));
  asio::async_write(client_, asio::buffer(*buf),
                    [self = shared_from_this(), buf, then = std::move(then)](
                      const asio::error_code& ec, std::size_t) {
                      if (self->phase_ == phase::closed)
                        return;
                      if (ec) {
                        self->stop("client stopped reading: " + ec.message());
                        return;
                      }
                      self->last_activity_ = clock_type::now();
                      then();
                    });
}

void egress_session::write_upstream(std::string data, std::function<void()> then) {
  auto buf = std::make_shared<std::string>(std::move(data));
  asio::async_write(upstream_, asio::buffer(*buf),
                    [self = shared_from_this(), buf, then = std::move(then)](
                      const asio::error_code& ec, std::size_t) {
                      if (self->phase_ == phase::closed)
                        return;
                      if (ec) {
                        self->stop("server stopped reading: " + ec.message());
                        return;
                      }
                      self->last_activity_ = clock_type::now();
                      then();
                    });
}

void egress_session::fail(unsigned status, const std::string& line) {
  if (phase_ == phase::closed)
    return;
  if (record_open_) {
    if (record_.reason.empty() || status != 403)
      record_.reason = line;
    if (record_.decision.empty())
      record_.decision = "error";
  }
  phase_ = phase::answering; // no reads, no timer from here on
  timer_.cancel();
  close_upstream();
  write_client(error_response(status, line), [this, status] {
    stop("answered " + std::to_string(status));
  });
}

void egress_session::emit_record(const std::string& how) {
  if (!record_open_)
    return;
  record_open_ = false;
  record_.duration_us = static_cast<uint64_t>(
    std::chrono::duration_cast<std::chrono::microseconds>(clock_type::now() - record_start_)
      .count());
  if (record_.reason.empty())
    record_.reason = how;
  else if (record_.decision != "deny")
    record_.reason += "; " + how;
  if (sink_)
    sink_(std::move(record_));
  record_ = connection_record{};
}

void egress_session::close_upstream() {
  if (!upstream_open_ && !upstream_.is_open())
    return;
  asio::error_code ec;
  upstream_.close(ec);
  upstream_open_ = false;
  upstream_host_.clear();
  upstream_port_ = 0;
  up_begin_ = up_end_ = 0;
}

} // namespace castellan::proxy
