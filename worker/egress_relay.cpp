/// @file egress_relay.cpp
/// The listener inside the sandbox and the hand-over to the proxy.

#include "worker/egress_relay.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <string>

#include "platform/linux/fd_passing.hpp"

namespace castellan::worker {

outcome<egress_relay> egress_relay::open(uint16_t port, int unix_fd) {
  unique_fd proxy{unix_fd};
  const std::string what = "egress relay";
  int domain = 0;
  socklen_t len = sizeof domain;
  if (::getsockopt(proxy.get(), SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0)
    return errno_failure(what + ": fd " + std::to_string(unix_fd) + " is not a socket");
  if (domain != AF_UNIX)
    return logic_failure(what + ": fd " + std::to_string(unix_fd) + " is not an AF_UNIX socket");
  if (port == 0)
    return logic_failure(what + ": port 0");
  unique_fd listener{::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)};
  if (!listener)
    return errno_failure(what + ": socket");
  const int one = 1;
  (void)::setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(listener.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0)
    return errno_failure(what + ": bind 127.0.0.1:" + std::to_string(port));
  if (::listen(listener.get(), 128) != 0)
    return errno_failure(what + ": listen");
  return egress_relay{std::move(listener), std::move(proxy)};
}

void egress_relay::accept_pending() noexcept {
  for (;;) {
    unique_fd conn{::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC)};
    if (!conn) {
      if (errno == EINTR || errno == ECONNABORTED)
        continue;
      return; // EAGAIN: none left; EMFILE and the like: try again on the next wake-up
    }
    // The socket goes to the proxy; this process keeps no copy. Closing
    // ours after sendmsg leaves the proxy's as the only one.
    if (platform::send_fd(proxy_.get(), conn.get(), MSG_DONTWAIT))
      ++passed_;
    else
      ++refused_;
  }
}

} // namespace castellan::worker
