/// @file egress_proxy.cpp
/// See egress_proxy.hpp.

#include "actors/proxy/egress_proxy.hpp"

#include <sys/socket.h>

#include <future>

#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <asio/posix/stream_descriptor.hpp>

#include "platform/linux/fd_passing.hpp"

namespace castellan::proxy {

struct egress_proxy::link_reader {
  link_reader(asio::io_context& io, int fd, std::shared_ptr<worker_link> l)
    : socket(io, fd), link(std::move(l)) {}
  asio::posix::stream_descriptor socket; ///< owns the AF_UNIX fd
  std::shared_ptr<worker_link> link;
};

egress_proxy::egress_proxy(egress_limits limits, record_sink sink)
  : limits_(limits), sink_(std::move(sink)), work_(asio::make_work_guard(io_)) {
  thread_ = std::thread([this] { io_.run(); });
}

egress_proxy::~egress_proxy() {
  asio::post(io_, [this] {
    std::vector<key> keys;
    for (const auto& [k, r] : links_)
      keys.push_back(k);
    for (const auto& k : keys)
      drop(k);
  });
  // Every socket and timer is closed now: their handlers finish with
  // operation_aborted, release their sessions, and run() returns once none
  // is left (destroying them inside ~io_context instead would tear I/O
  // objects down while their services are being destroyed).
  work_.reset();
  if (thread_.joinable())
    thread_.join();
  links_.clear();
}

void egress_proxy::attach(std::string pool, uint64_t worker_id, unique_fd link,
                          std::shared_ptr<const policy::compiled_policy> policy,
                          std::shared_ptr<const std::atomic<uint64_t>> current_exec) {
  auto fd = std::make_shared<unique_fd>(std::move(link));
  asio::post(io_, [this, pool = std::move(pool), worker_id, fd, policy = std::move(policy),
                   current_exec = std::move(current_exec)]() mutable {
    key k{pool, worker_id};
    drop(k);
    if (!*fd || !policy)
      return;
    auto wl = std::make_shared<worker_link>();
    wl->pool = std::move(pool);
    wl->worker_id = worker_id;
    wl->policy = std::move(policy);
    wl->current_exec = std::move(current_exec);
    asio::error_code ec;
    auto reader = std::make_shared<link_reader>(io_, fd->release(), std::move(wl));
    reader->socket.non_blocking(true, ec);
    links_[k] = reader;
    watch(reader);
  });
}

void egress_proxy::detach(std::string pool, uint64_t worker_id) {
  asio::post(io_, [this, k = key{std::move(pool), worker_id}] { drop(k); });
}

egress_stats egress_proxy::stats() {
  std::promise<egress_stats> p;
  auto f = p.get_future();
  asio::post(io_, [this, &p] {
    egress_stats s;
    s.workers = static_cast<uint32_t>(links_.size());
    s.open_connections = counters_.open;
    s.accepted = counters_.accepted;
    s.refused = refused_;
    s.denied = counters_.denied;
    s.bytes_out = counters_.bytes_out;
    s.bytes_in = counters_.bytes_in;
    p.set_value(s);
  });
  return f.get();
}

void egress_proxy::drop(const key& k) {
  auto it = links_.find(k);
  if (it == links_.end())
    return;
  auto reader = it->second;
  links_.erase(it);
  reader->link->detached = true;
  asio::error_code ec;
  reader->socket.close(ec);
  // stop() may release sessions: iterate over a copy.
  const auto sessions = reader->link->sessions;
  for (egress_session* s : sessions)
    s->stop("the worker went away");
}

void egress_proxy::watch(const std::shared_ptr<link_reader>& reader) {
  reader->socket.async_wait(asio::posix::stream_descriptor::wait_read,
                            [this, reader](const asio::error_code& ec) {
                              if (ec || reader->link->detached)
                                return;
                              accept_from(reader);
                            });
}

void egress_proxy::accept_from(const std::shared_ptr<link_reader>& reader) {
  for (;;) {
    auto got = platform::receive_fd(reader->socket.native_handle(), MSG_DONTWAIT);
    if (!got) {
      if (got.error().code == EAGAIN || got.error().code == EWOULDBLOCK)
        break;
      // A hostile or broken worker: stop listening to it.
      drop({reader->link->pool, reader->link->worker_id});
      return;
    }
    if (got->closed) {
      drop({reader->link->pool, reader->link->worker_id});
      return;
    }
    if (got->fd)
      serve(reader->link, std::move(got->fd));
  }
  watch(reader);
}

void egress_proxy::serve(const std::shared_ptr<worker_link>& link, unique_fd fd) {
  // Only a TCP stream socket is served; anything else a worker sends is closed.
  int type = 0, domain = 0;
  socklen_t len = sizeof type;
  if (::getsockopt(fd.get(), SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM)
    return;
  len = sizeof domain;
  if (::getsockopt(fd.get(), SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 ||
      (domain != AF_INET && domain != AF_INET6))
    return;
  asio::error_code ec;
  asio::ip::tcp::socket client(io_);
  client.assign(domain == AF_INET ? asio::ip::tcp::v4() : asio::ip::tcp::v6(), fd.get(), ec);
  if (ec)
    return;
  fd.release();
  client.non_blocking(true, ec);
  if (link->open_connections >= limits_.connections_per_worker) {
    ++refused_;
    egress_session::refuse(client, 429,
                           "worker " + std::to_string(link->worker_id) + " has " +
                             std::to_string(link->open_connections) +
                             " open connections, the limit per worker");
    if (sink_) {
      connection_record r;
      r.exec_id = link->exec_now();
      r.pool = link->pool;
      r.worker_id = link->worker_id;
      r.decision = "deny";
      r.rule = "limit";
      r.reason = "refused: " + std::to_string(limits_.connections_per_worker) +
                 " open connections is the limit per worker";
      sink_(std::move(r));
    }
    return;
  }
  if (counters_.open >= limits_.connections_total) {
    ++refused_;
    egress_session::refuse(client, 503,
                           "the proxy has " + std::to_string(counters_.open) +
                             " open connections, its limit");
    return;
  }
  auto session = std::make_shared<egress_session>(io_, std::move(client), link, limits_, sink_,
                                                  counters_);
  session->start();
}

} // namespace castellan::proxy
