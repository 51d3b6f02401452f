#include "platform/linux/thread_capabilities.hpp"

#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace castellan::platform {

int get_thread_capabilities(thread_capability_sets& out) noexcept {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &header, data) != 0)
    return errno;
  out.effective = data[0].effective | (uint64_t{data[1].effective} << 32);
  out.permitted = data[0].permitted | (uint64_t{data[1].permitted} << 32);
  out.inheritable = data[0].inheritable | (uint64_t{data[1].inheritable} << 32);
  return 0;
}

int set_thread_capabilities(const thread_capability_sets& sets) noexcept {
  // pid 0: the calling thread, whose credentials alone change.
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  data[0].effective = static_cast<uint32_t>(sets.effective);
  data[1].effective = static_cast<uint32_t>(sets.effective >> 32);
  data[0].permitted = static_cast<uint32_t>(sets.permitted);
  data[1].permitted = static_cast<uint32_t>(sets.permitted >> 32);
  data[0].inheritable = static_cast<uint32_t>(sets.inheritable);
  data[1].inheritable = static_cast<uint32_t>(sets.inheritable >> 32);
  if (::syscall(SYS_capset, &header, data) != 0)
    return errno;
  return 0;
}

} // namespace castellan::platform
