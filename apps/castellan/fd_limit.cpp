#include "apps/castellan/fd_limit.hpp"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>

namespace castellan::cli {

std::string raise_fd_limit(uint64_t max_connections) {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0)
    return std::string("getrlimit(RLIMIT_NOFILE): ") + std::strerror(errno);
  const rlim_t want = static_cast<rlim_t>(max_connections + fd_reserve);
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < want) {
    const rlim_t before = lim.rlim_cur;
    lim.rlim_cur = (lim.rlim_max == RLIM_INFINITY || lim.rlim_max >= want) ? want : lim.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &lim) != 0)
      lim.rlim_cur = before;
  }
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < want)
    return "RLIMIT_NOFILE is " + std::to_string(lim.rlim_cur) + " (hard limit " +
           std::to_string(lim.rlim_max) + "): fewer fds than --max-connections " +
           std::to_string(max_connections) + " and " + std::to_string(fd_reserve) +
           " for the workers need; connections beyond what is left wait in the backlog";
  return {};
}

} // namespace castellan::cli
