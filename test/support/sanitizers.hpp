#pragma once

/// @file sanitizers.hpp
/// What a test may not measure under a sanitizer.

namespace castellan::test {

/// True in an AddressSanitizer build. Its allocator keeps freed memory in a
/// quarantine (256 MiB by default) and adds shadow memory, so a process's
/// RSS says nothing about what the code holds: bounds on RSS growth are
/// checked in the plain build only.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool address_sanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool address_sanitizer = true;
#else
inline constexpr bool address_sanitizer = false;
#endif
#else
inline constexpr bool address_sanitizer = false;
#endif

} // namespace castellan::test
