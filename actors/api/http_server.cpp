#include "actors/api/http_server.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <deque>
#include <limits>
#include <optional>
#include <thread>
#include <type_traits>
#include <unordered_map>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http.hpp>
#include <spdlog/spdlog.h>

#include "actors/api/api_error.hpp"

namespace castellan::api {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using unix_socket = net::local::stream_protocol::socket;
using tcp_socket = net::ip::tcp::socket;
using tls_stream = net::ssl::stream<tcp_socket>;
using error_code = boost::system::error_code;

namespace {

/// Bytes a client may send ahead (pipelined) while its request runs; beyond
/// that the server stops reading until it has answered.
constexpr std::size_t pipeline_cap = 64 * 1024;

/// The most a read adds to a connection's buffer at once.
constexpr std::size_t read_chunk = 64 * 1024;

/// The socket under a stream: the stream itself, or a TLS stream's TCP
/// socket (which cancel, shutdown and close act on).
template <class Socket> Socket& lowest(Socket& s) {
  return s;
}
tcp_socket& lowest(tls_stream& s) {
  return s.next_layer();
}

/// What every open connection is to the server.
class session_base {
public:
  virtual ~session_base() = default;
  virtual void deliver(http_response r) = 0;
  /// A streamed response: its head now, then pieces of its body, then the
  /// end, after which the connection closes.
  virtual void stream_head(unsigned status, const std::string& content_type,
                           const std::vector<std::pair<std::string, std::string>>& headers) = 0;
  virtual void stream_data(std::string bytes, std::function<void()> on_written) = 0;
  virtual void stream_end() = 0;
  virtual void close() = 0;
  /// At stop: closes now, unless a response is ready or being written,
  /// which is finished first (its timer bounds how long).
  virtual void close_after_write() = 0;
};

/// A unix socket this server created: removed at stop if it is still the
/// same file.
struct owned_socket {
  std::string path;
  dev_t dev = 0;
  ino_t ino = 0;
};

} // namespace

struct http_server::impl {
  net::io_context io{1};
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  http_limits limits;
  callbacks cb;
  std::vector<listen_address> bound;
  std::vector<std::unique_ptr<net::local::stream_protocol::acceptor>> unix_acceptors;
  std::vector<std::unique_ptr<net::ip::tcp::acceptor>> tcp_acceptors;
  std::vector<bool> tcp_tls; ///< by tcp_acceptors' index: a `tls:` listener
  /// The TLS listeners' context (null without one).
  std::unique_ptr<net::ssl::context> tls_ctx;
  std::vector<owned_socket> owned;
  /// Requests waiting for their response, by id (I/O thread only).
  std::unordered_map<uint64_t, std::weak_ptr<session_base>> pending;
  /// Open connections (I/O thread only).
  std::unordered_map<session_base*, std::weak_ptr<session_base>> sessions;
  std::atomic<std::size_t> open{0};
  uint64_t next_id = 1;
  bool stopped = false;
  std::thread thread;

  template <class Socket> void admit(Socket s, bool tcp, bool tls);
  template <class Acceptor, class Socket> void accept_loop(Acceptor& acc, bool tcp, bool tls);
  void forget(session_base* s) {
    sessions.erase(s);
    open.store(sessions.size(), std::memory_order_relaxed);
  }
};

namespace {

template <class Socket>
class session final : public session_base, public std::enable_shared_from_this<session<Socket>> {
public:
  /// `socket_args` make the Socket: a socket, or a TCP socket and the TLS
  /// context.
  template <class... SocketArgs>
  session(http_server::impl& srv, bool tcp, std::string peer, SocketArgs&&... socket_args)
      : socket_(std::forward<SocketArgs>(socket_args)...), timer_(srv.io), srv_(srv), tcp_(tcp),
        peer_(std::move(peer)),
        buffer_(srv.limits.header_bytes + pipeline_cap + read_chunk) {}

  void start() {
    if constexpr (is_tls) {
      // The handshake counts against the read timeout: a client that
      // starts one and stalls (a slowloris on TLS) is closed as a slow
      // request is.
      arm_timer();
      socket_.async_handshake(net::ssl::stream_base::server,
                              [self = this->shared_from_this()](error_code ec) {
                                if (self->closed_)
                                  return;
                                if (ec) {
                                  // Not TLS (a plain HTTP client), an old
                                  // protocol, no shared cipher: no answer
                                  // can reach such a client.
                                  self->close();
                                  return;
                                }
                                self->read_request();
                              });
    } else {
      read_request();
    }
  }

  void deliver(http_response r) override {
    const auto keep = std::move(hold_);
    if (closed_ || pending_ == 0)
      return;
    srv_.pending.erase(pending_);
    pending_ = 0;
    response_ = build(std::move(r));
    if (watching_) {
      // The watch read completes (aborted) and writes the response.
      error_code ignored;
      lowest(socket_).cancel(ignored);
      return;
    }
    write_response();
  }

  void close_after_write() override {
    // response_ is set from deliver() until the write completes, including
    // while the watch read is being cancelled to make way for it. A
    // stream's queued pieces are written first as well.
    if (!response_ && !streaming_)
      close();
  }

  void stream_head(unsigned status, const std::string& content_type,
                   const std::vector<std::pair<std::string, std::string>>& headers) override {
    if (closed_ || pending_ == 0 || streaming_)
      return;
    streaming_ = true;
    // No length: the body ends when the connection does (the request
    // stays pending until then, so a client that leaves has it cancelled).
    std::string head = std::string(version_ == 10 ? "HTTP/1.0 " : "HTTP/1.1 ") +
                       std::to_string(status) + " " +
                       std::string(http::obsolete_reason(static_cast<http::status>(status))) +
                       "\r\nServer: castellan\r\nContent-Type: " + content_type +
                       "\r\nCache-Control: no-store\r\nConnection: close\r\n";
    for (const auto& [name, value] : headers)
      head += name + ": " + value + "\r\n";
    head += "\r\n";
    if constexpr (is_tls) {
      // One read and one write at a time on a TLS stream: the watch goes,
      // and a client that leaves is seen at the next write.
      if (watching_) {
        error_code ignored;
        lowest(socket_).cancel(ignored);
      }
    }
    stream_data(std::move(head), {});
  }

  void stream_data(std::string bytes, std::function<void()> on_written) override {
    if (closed_ || !streaming_ || bytes.empty())
      return;
    queued_bytes_ += bytes.size();
    if (queued_bytes_ > stream_queue_limit) {
      // The client does not take what it asked for: it goes, and its
      // request with it.
      close();
      return;
    }
    stream_queue_.push_back({std::move(bytes), std::move(on_written)});
    pump_stream();
  }

  void stream_end() override {
    if (closed_ || !streaming_)
      return;
    stream_ended_ = true;
    pump_stream();
  }

  void close() override {
    const auto keep = std::move(hold_);
    if (closed_)
      return;
    closed_ = true;
    timer_.cancel();
    if (pending_ != 0) {
      const uint64_t id = pending_;
      srv_.pending.erase(id);
      pending_ = 0;
      if (srv_.cb.on_abandoned)
        srv_.cb.on_abandoned(id);
    }
    // A TLS connection is closed without close_notify: every response is
    // framed by its length, so a truncation is seen without it, and waiting
    // for the peer's would let it hold the connection.
    error_code ignored;
    lowest(socket_).shutdown(net::socket_base::shutdown_both, ignored);
    lowest(socket_).close(ignored);
    srv_.forget(this);
  }

private:
  void arm_timer() {
    timer_.expires_after(srv_.limits.read_timeout);
    timer_.async_wait([self = this->shared_from_this()](error_code ec) {
      if (ec || self->closed_)
        return;
      // Slow or silent client: its connection is closed, whatever it was
      // in the middle of (a slowloris never gets a whole request in).
      self->close();
    });
  }

  void read_request() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(srv_.limits.header_bytes));
    // No limit while the head is read: the head decides which one this
    // request has (decide_body_limit, from on_header), before any of its
    // body is read, and checks its Content-Length then.
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    body_limit_ = srv_.limits.body_bytes;
    // One timer for the whole request, headers and body.
    arm_timer();
    http::async_read_header(
        socket_, buffer_, *parser_,
        [self = this->shared_from_this()](error_code ec, std::size_t) { self->on_header(ec); });
  }

  /// Answers a failed read; false when there was none.
  bool read_failed(error_code ec) {
    if (!ec)
      return false;
    timer_.cancel();
    if (ec == http::error::end_of_stream || ec == net::error::eof ||
        ec == net::error::connection_reset || ec == net::error::operation_aborted) {
      close();
    } else if (ec == http::error::header_limit) {
      fail(431, "headers_too_large",
           "the request line and headers exceed " + std::to_string(srv_.limits.header_bytes) +
               " bytes");
    } else if (ec == http::error::buffer_overflow) {
      // The parser consumes the body as it arrives; what fills the buffer
      // is a line without end (a chunk header with an endless extension).
      fail(400, "bad_http",
           "a line of the request (a chunk header) exceeds " +
               std::to_string(srv_.limits.header_bytes + pipeline_cap) + " bytes");
    } else if (ec == http::error::body_limit) {
      fail(413, "body_too_large", "the body exceeds " + std::to_string(body_limit_) + " bytes");
    } else {
      fail(400, "bad_http", "malformed HTTP request: " + ec.message());
    }
    return true;
  }

  void on_header(error_code ec) {
    if (closed_ || read_failed(ec))
      return;
    if (!decide_body_limit())
      return;
    if (beast::iequals(parser_->get()[http::field::expect], "100-continue") &&
        !parser_->is_done()) {
      // The client waits for this before it sends the body (curl does for
      // bodies over 1 MiB). A body beyond the limit was refused above from
      // its Content-Length, before the client sent it.
      static const std::string go_on = "HTTP/1.1 100 Continue\r\n\r\n";
      net::async_write(socket_, net::buffer(go_on),
                       [self = this->shared_from_this()](error_code wec, std::size_t) {
                         if (self->closed_)
                           return;
                         if (wec) {
                           self->close();
                           return;
                         }
                         self->read_body();
                       });
      return;
    }
    read_body();
  }

  /// Sets this request's body limit from its head: body_bytes, or
  /// upload_bytes when callbacks::large_body says so. A Content-Length
  /// beyond it is refused now, before the client sends the body; a chunked
  /// body is cut off by the parser at the limit. False when refused.
  bool decide_body_limit() {
    if (srv_.cb.large_body) {
      auto& req = parser_->get();
      http_request head;
      head.method = std::string(req.method_string());
      head.target = std::string(req.target());
      head.content_type = std::string(req[http::field::content_type]);
      head.host = std::string(req[http::field::host]);
      auto [first, last] = req.equal_range(http::field::authorization);
      for (auto it = first; it != last; ++it)
        head.authorization += (head.authorization.empty() ? "" : ", ") + std::string(it->value());
      head.tcp = tcp_;
      head.tls = is_tls;
      head.peer = peer_;
      if (srv_.cb.large_body(head))
        body_limit_ = std::max(srv_.limits.body_bytes, srv_.limits.upload_bytes);
    }
    parser_->body_limit(static_cast<std::uint64_t>(body_limit_));
    const auto length = parser_->content_length();
    if (length && *length > body_limit_) {
      read_failed(http::error::body_limit);
      return false;
    }
    return true;
  }

  void read_body() {
    http::async_read(
        socket_, buffer_, *parser_,
        [self = this->shared_from_this()](error_code ec, std::size_t) { self->on_read(ec); });
  }

  void on_read(error_code ec) {
    if (closed_ || read_failed(ec))
      return;
    timer_.cancel();
    auto& req = parser_->get();
    http_request out;
    out.id = srv_.next_id++;
    out.method = std::string(req.method_string());
    out.target = std::string(req.target());
    out.content_type = std::string(req[http::field::content_type]);
    out.host = std::string(req[http::field::host]);
    out.accept = std::string(req[http::field::accept]);
    // Every Authorization header, joined as a list: two of them make a
    // value no bearer token matches (a comma), never a choice of one.
    auto [first, last] = req.equal_range(http::field::authorization);
    for (auto it = first; it != last; ++it)
      out.authorization += (out.authorization.empty() ? "" : ", ") + std::string(it->value());
    out.body = std::move(req.body());
    out.tcp = tcp_;
    out.tls = is_tls;
    out.peer = peer_;
    keep_alive_ = req.keep_alive();
    version_ = req.version();
    parser_.reset();
    pending_ = out.id;
    srv_.pending.emplace(out.id, this->shared_from_this());
    // The request first: the watch's first read (a syscall that finds
    // nothing, as a rule) would only delay it. on_request answers through
    // respond(), which posts, so nothing of this session runs before the
    // watch starts.
    srv_.cb.on_request(std::move(out));
    // Reading on while the request runs tells a client that went away
    // (EOF, reset) from one that waits: its request is then abandoned.
    watch();
  }

  void watch() {
    if (buffer_.size() >= pipeline_cap) {
      // Not reading on: no operation of the socket holds the session until
      // its answer, and it must not go (its client would be left without an
      // answer, and its place among the open connections kept for ever).
      hold_ = this->shared_from_this();
      return;
    }
    watching_ = true;
    socket_.async_read_some(
        buffer_.prepare(4096),
        [self = this->shared_from_this()](error_code ec, std::size_t n) { self->on_watch(ec, n); });
  }

  void on_watch(error_code ec, std::size_t n) {
    watching_ = false;
    if (closed_)
      return;
    if (!ec)
      buffer_.commit(n);
    if (streaming_) {
      if (is_tls && ec == net::error::operation_aborted)
        return; // cancelled by stream_head: the stream's writes go on alone
      if (ec) {
        close(); // the client went away: its request is abandoned
        return;
      }
      watch();
      return;
    }
    if (response_) {
      write_response();
      return;
    }
    if (ec) {
      close();
      return;
    }
    watch();
  }

  http::response<http::string_body> build(http_response r) const {
    http::response<http::string_body> res;
    res.result(r.status);
    res.version(version_ == 10 ? 10 : 11);
    res.set(http::field::server, "castellan");
    res.set(http::field::content_type, r.content_type);
    for (auto& h : r.headers)
      res.set(h.first, h.second);
    res.keep_alive(keep_alive_);
    res.body() = std::move(r.body);
    res.prepare_payload();
    return res;
  }

  /// An error found while reading: answered, then the connection closes
  /// (what follows a malformed request cannot be trusted to frame).
  void fail(unsigned status, const std::string& code, const std::string& message) {
    keep_alive_ = false;
    http_response r;
    r.status = status;
    r.body = error_body(code, message);
    response_ = build(std::move(r));
    write_response();
  }

  void write_response() {
    // The write starts (its first sendmsg is made at once) before the timer
    // is armed: arming may cost a timerfd_settime, which the client need
    // not wait for. Both happen before this thread runs any handler.
    http::async_write(
        socket_, *response_,
        [self = this->shared_from_this()](error_code ec, std::size_t) { self->on_write(ec); });
    arm_timer();
  }

  void on_write(error_code ec) {
    timer_.cancel();
    if (closed_)
      return;
    const bool again = !ec && keep_alive_ && !response_->need_eof() && !srv_.stopped;
    response_.reset();
    if (!again) {
      close();
      return;
    }
    read_request();
  }

  /// Writes the stream's next piece, or closes after its last.
  void pump_stream() {
    if (stream_writing_ || closed_)
      return;
    if (stream_queue_.empty()) {
      if (stream_ended_) {
        // Over: not abandoned, so nothing is cancelled.
        srv_.pending.erase(pending_);
        pending_ = 0;
        close();
      }
      return;
    }
    stream_writing_ = true;
    arm_timer(); // the client must take each piece within the read timeout
    net::async_write(socket_, net::buffer(stream_queue_.front().bytes),
                     [self = this->shared_from_this()](error_code ec, std::size_t) {
                       self->timer_.cancel();
                       self->stream_writing_ = false;
                       if (self->closed_)
                         return;
                       if (ec) {
                         self->close();
                         return;
                       }
                       auto done = std::move(self->stream_queue_.front());
                       self->queued_bytes_ -= done.bytes.size();
                       self->stream_queue_.pop_front();
                       if (done.on_written)
                         done.on_written();
                       self->pump_stream();
                     });
  }

  static constexpr bool is_tls = std::is_same_v<Socket, tls_stream>;
  /// The most a streamed response may have waiting for its client.
  static constexpr std::size_t stream_queue_limit = 16u << 20;

  Socket socket_;
  net::steady_timer timer_;
  http_server::impl& srv_;
  bool tcp_;
  std::string peer_; ///< http_request::peer
  /// Bounded: Beast limits headers and the body, not the length of a
  /// chunk header, which a client could otherwise make endless.
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<http::response<http::string_body>> response_;
  uint64_t pending_ = 0;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool watching_ = false;
  bool closed_ = false;
  // A streamed response (stream_head … stream_end).
  bool streaming_ = false;
  /// The body limit of the request being read (decide_body_limit).
  std::size_t body_limit_ = 0;
  bool stream_writing_ = false;
  bool stream_ended_ = false;
  struct piece {
    std::string bytes;
    std::function<void()> on_written;
  };
  std::deque<piece> stream_queue_;
  std::size_t queued_bytes_ = 0;
  /// The session itself while a request waits for its answer with nothing
  /// read from the socket (the pipelined bytes fill the read-ahead): deliver()
  /// or close() lets go.
  std::shared_ptr<session> hold_;
};

/// The answer to a connection beyond the limit, written without waiting.
const std::string& refusal() {
  static const std::string text = [] {
    const std::string body =
        error_body("too_many_connections", "the server has too many open connections; retry later");
    return "HTTP/1.1 503 Service Unavailable\r\nServer: castellan\r\nContent-Type: "
           "application/json\r\nConnection: close\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
  }();
  return text;
}

/// Is a server listening on the unix socket `path`? (A non-blocking
/// connect: a full backlog counts as alive.)
outcome<bool> unix_socket_alive(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return errno_failure("socket(AF_UNIX)");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  const int err = errno;
  ::close(fd);
  if (rc == 0 || err == EAGAIN || err == EINPROGRESS)
    return true;
  if (err == ECONNREFUSED || err == ENOENT)
    return false;
  return errno_failure("connect to '" + path + "'", err);
}

outcome<int> bind_unix(const std::string& path, const unix_socket_access& access,
                       owned_socket& owned) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      return logic_failure("'" + path + "' exists and is not a socket; not replacing it");
    auto alive = unix_socket_alive(path);
    if (!alive)
      return alive.error();
    if (*alive)
      return logic_failure("another server is listening on '" + path + "'");
    // A stale socket of a server that died.
    if (::unlink(path.c_str()) != 0 && errno != ENOENT)
      return errno_failure("remove the stale socket '" + path + "'");
  } else if (errno != ENOENT) {
    return errno_failure("lstat '" + path + "'");
  }
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return errno_failure("socket(AF_UNIX)");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    auto f = errno_failure("bind '" + path + "'");
    ::close(fd);
    return f;
  }
  // Until listen() nobody can connect, so the socket is never reachable
  // with the mode bind gave it. AT_SYMLINK_NOFOLLOW: a symlink put in its
  // place is refused, not followed. The group first: chmod after chown
  // keeps the mode whatever chown clears.
  char mode_text[8];
  std::snprintf(mode_text, sizeof mode_text, "%04o", static_cast<unsigned>(access.mode));
  const bool grouped = access.gid >= 0;
  const auto gid = static_cast<gid_t>(access.gid);
  errno = 0;
  if ((grouped &&
       ::fchownat(AT_FDCWD, path.c_str(), static_cast<uid_t>(-1), gid, AT_SYMLINK_NOFOLLOW) != 0) ||
      ::fchmodat(AT_FDCWD, path.c_str(), static_cast<mode_t>(access.mode), AT_SYMLINK_NOFOLLOW) !=
          0 ||
      ::lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_uid != ::geteuid() ||
      (grouped && st.st_gid != gid) || (st.st_mode & 07777) != access.mode) {
    auto f = errno_failure("make '" + path + "' a socket of mode " + mode_text + " owned by uid " +
                           std::to_string(::geteuid()) +
                           (grouped ? " and gid " + std::to_string(gid) : std::string()));
    ::close(fd);
    ::unlink(path.c_str());
    return f;
  }
  owned.path = path;
  owned.dev = st.st_dev;
  owned.ino = st.st_ino;
  if (::listen(fd, SOMAXCONN) != 0) {
    auto f = errno_failure("listen on '" + path + "'");
    ::close(fd);
    ::unlink(path.c_str());
    return f;
  }
  return fd;
}

/// Who is at the other end of a unix socket, as the kernel saw them when
/// they connected (SO_PEERCRED): what audit records name as the origin.
std::string peer_of(unix_socket& s) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(s.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
    return "unix";
  return "unix uid=" + std::to_string(cred.uid) + " gid=" + std::to_string(cred.gid) +
         " pid=" + std::to_string(cred.pid);
}

/// The address and port a TCP client connects from.
std::string peer_of(tcp_socket& s) {
  error_code ec;
  const auto ep = s.remote_endpoint(ec);
  if (ec)
    return "tcp";
  const auto addr = ep.address();
  return "tcp " + (addr.is_v6() ? "[" + addr.to_string() + "]" : addr.to_string()) + ":" +
         std::to_string(ep.port());
}

} // namespace

template <class Socket> void http_server::impl::admit(Socket s, bool tcp, bool tls) {
  if (sessions.size() >= limits.max_connections) {
    // Refused at once with a clear answer, written without blocking: the
    // limit is what keeps a flood of connections from exhausting the fds.
    // A TLS client could not read a plain answer: it is only closed.
    error_code ignored;
    if (!tls) {
      s.non_blocking(true, ignored);
      s.write_some(net::buffer(refusal()), ignored);
    }
    s.shutdown(net::socket_base::shutdown_send, ignored);
    s.close(ignored);
    return;
  }
  std::string peer = peer_of(s);
  std::shared_ptr<session_base> sp;
  if constexpr (std::is_same_v<Socket, tcp_socket>) {
    if (tls) {
      auto t = std::make_shared<session<tls_stream>>(*this, tcp, std::move(peer), std::move(s), *tls_ctx);
      sessions.emplace(t.get(), t);
      open.store(sessions.size(), std::memory_order_relaxed);
      t->start();
      return;
    }
  }
  auto plain = std::make_shared<session<Socket>>(*this, tcp, std::move(peer), std::move(s));
  sessions.emplace(plain.get(), plain);
  open.store(sessions.size(), std::memory_order_relaxed);
  plain->start();
}

template <class Acceptor, class Socket>
void http_server::impl::accept_loop(Acceptor& acc, bool tcp, bool tls) {
  acc.async_accept([this, &acc, tcp, tls](error_code ec, Socket s) {
    if (stopped || ec == net::error::operation_aborted)
      return;
    if (!ec) {
      admit(std::move(s), tcp, tls);
      accept_loop<Acceptor, Socket>(acc, tcp, tls);
      return;
    }
    // Out of fds or memory: retry shortly instead of spinning.
    spdlog::warn("api: accept on {}: {}", tcp ? "tcp" : "unix", ec.message());
    auto timer = std::make_shared<net::steady_timer>(io, std::chrono::milliseconds(100));
    timer->async_wait([this, &acc, tcp, tls, timer](error_code) {
      if (!stopped)
        accept_loop<Acceptor, Socket>(acc, tcp, tls);
    });
  });
}

http_server::http_server(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

http_server::~http_server() {
  stop();
}

outcome<std::unique_ptr<http_server>> http_server::start(const std::vector<listen_address>& where,
                                                         http_limits limits, callbacks cb,
                                                         unix_socket_access access,
                                                         const tls_files& tls) {
  if (where.empty())
    return logic_failure("no listen address");
  auto p = std::make_unique<impl>();
  p->limits = limits;
  p->cb = std::move(cb);
  for (const auto& addr : where) {
    if (addr.type != listen_address::kind::tcp || !addr.tls || p->tls_ctx)
      continue;
    if (!tls.enabled())
      return logic_failure("listen " + addr.to_string() +
                           ": a TLS listener needs a certificate and a key ([tls])");
    p->tls_ctx = std::make_unique<net::ssl::context>(net::ssl::context::tls_server);
    if (auto why = configure_server_tls(p->tls_ctx->native_handle(), tls); !why.empty())
      return logic_failure("listen " + addr.to_string() + ": " + why);
  }
  auto undo = [&p] {
    for (auto& o : p->owned)
      ::unlink(o.path.c_str());
  };
  for (const auto& addr : where) {
    if (addr.type == listen_address::kind::unix_socket) {
      owned_socket owned;
      auto fd = bind_unix(addr.path, access, owned);
      if (!fd) {
        undo();
        return fd.error().wrap("listen " + addr.to_string());
      }
      p->owned.push_back(owned);
      auto acc = std::make_unique<net::local::stream_protocol::acceptor>(p->io);
      error_code ec;
      acc->assign(net::local::stream_protocol(), *fd, ec);
      if (ec) {
        ::close(*fd);
        undo();
        return logic_failure("listen " + addr.to_string() + ": " + ec.message());
      }
      p->unix_acceptors.push_back(std::move(acc));
      p->bound.push_back(addr);
      continue;
    }
    error_code ec;
    auto ip = net::ip::make_address(addr.host == "localhost" ? "127.0.0.1" : addr.host, ec);
    if (ec) {
      undo();
      return logic_failure("listen " + addr.to_string() + ": '" + addr.host +
                           "' is not an IP address (names other than localhost are not resolved)");
    }
    if (!addr.tls && !ip.is_loopback()) {
      undo();
      return logic_failure("listen " + addr.to_string() +
                           ": not a loopback address; plain TCP listens on loopback only (use "
                           "tls:HOST:PORT with a config's [tls] and tokens)");
    }
    auto acc = std::make_unique<net::ip::tcp::acceptor>(p->io);
    net::ip::tcp::endpoint ep(ip, addr.port);
    acc->open(ep.protocol(), ec);
    if (!ec)
      acc->set_option(net::socket_base::reuse_address(true), ec);
    if (!ec)
      acc->bind(ep, ec);
    if (!ec)
      acc->listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      undo();
      return logic_failure("listen " + addr.to_string() + ": " + ec.message());
    }
    listen_address b = addr;
    b.host = ip.to_string();
    b.port = acc->local_endpoint().port();
    p->tcp_acceptors.push_back(std::move(acc));
    p->tcp_tls.push_back(addr.tls);
    p->bound.push_back(std::move(b));
  }
  for (auto& acc : p->unix_acceptors)
    p->accept_loop<net::local::stream_protocol::acceptor, unix_socket>(*acc, false, false);
  for (std::size_t i = 0; i < p->tcp_acceptors.size(); ++i)
    p->accept_loop<net::ip::tcp::acceptor, tcp_socket>(*p->tcp_acceptors[i], true, p->tcp_tls[i]);
  p->work.emplace(p->io.get_executor());
  impl* raw = p.get();
  p->thread = std::thread([raw] {
    // Signals go to the thread that waits for them (castellan serve).
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    raw->io.run();
  });
  return std::unique_ptr<http_server>(new http_server(std::move(p)));
}

void http_server::respond(uint64_t id, http_response response) {
  net::post(impl_->io, [p = impl_.get(), id, r = std::move(response)]() mutable {
    auto it = p->pending.find(id);
    if (it == p->pending.end())
      return; // its client went away
    if (auto s = it->second.lock())
      s->deliver(std::move(r));
    else
      p->pending.erase(it);
  });
}

namespace {

/// Runs `fn` on the session of pending request `id`, on the I/O thread.
template <class Fn>
void with_pending(http_server::impl* p, uint64_t id, Fn fn) {
  auto it = p->pending.find(id);
  if (it == p->pending.end())
    return; // its client went away
  if (auto s = it->second.lock())
    fn(*s);
  else
    p->pending.erase(it);
}

} // namespace

void http_server::respond_stream(uint64_t id, unsigned status, std::string content_type,
                                 std::vector<std::pair<std::string, std::string>> headers) {
  net::post(impl_->io, [p = impl_.get(), id, status, type = std::move(content_type),
                        extra = std::move(headers)] {
    with_pending(p, id, [&](session_base& s) { s.stream_head(status, type, extra); });
  });
}

void http_server::stream(uint64_t id, std::string bytes, std::function<void()> on_written) {
  net::post(impl_->io, [p = impl_.get(), id, b = std::move(bytes),
                        w = std::move(on_written)]() mutable {
    with_pending(p, id, [&](session_base& s) { s.stream_data(std::move(b), std::move(w)); });
  });
}

void http_server::end_stream(uint64_t id) {
  net::post(impl_->io, [p = impl_.get(), id] {
    with_pending(p, id, [](session_base& s) { s.stream_end(); });
  });
}

void http_server::post(std::function<void()> fn) {
  net::post(impl_->io, std::move(fn));
}

const std::vector<listen_address>& http_server::bound() const {
  return impl_->bound;
}

std::size_t http_server::connections() const {
  return impl_->open.load(std::memory_order_relaxed);
}

void http_server::stop() {
  if (!impl_ || !impl_->thread.joinable())
    return;
  net::post(impl_->io, [p = impl_.get()] {
    p->stopped = true;
    error_code ignored;
    for (auto& acc : p->unix_acceptors)
      acc->close(ignored);
    for (auto& acc : p->tcp_acceptors)
      acc->close(ignored);
    std::vector<std::shared_ptr<session_base>> open;
    for (auto& kv : p->sessions)
      if (auto s = kv.second.lock())
        open.push_back(std::move(s));
    // Responses already handed over are written before their connection
    // closes (the drain's last answers); everything else closes now.
    for (auto& s : open)
      s->close_after_write();
    p->work.reset();
  });
  impl_->thread.join();
  for (const auto& o : impl_->owned) {
    struct stat st {};
    if (::lstat(o.path.c_str(), &st) == 0 && st.st_dev == o.dev && st.st_ino == o.ino)
      ::unlink(o.path.c_str());
  }
  impl_->owned.clear();
}

} // namespace castellan::api
