#include "actors/policy/engine/syscall_names.hpp"

#include <seccomp.h>

#include <cstring>

namespace castellan::policy {

bool is_known_syscall(std::string_view name) noexcept {
  // Syscall names are short identifiers; anything else cannot be one, and the
  // bound keeps the NUL-terminated copy on the stack.
  constexpr size_t max_name = 64;
  if (name.empty() || name.size() >= max_name)
    return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
      return false;
  char buf[max_name];
  std::memcpy(buf, name.data(), name.size());
  buf[name.size()] = '\0';
  return seccomp_syscall_resolve_name(buf) != __NR_SCMP_ERROR;
}

} // namespace castellan::policy
