#pragma once

/// @file outcome.hpp
/// The error value of castellan's CAF-free layers (ipc, platform, the policy
/// engine): an errno (or 0) plus a message that names what failed and where,
/// wrapped with more context on the way up. Actors turn it into `caf::error`.

#include <cerrno>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

namespace castellan {

/// What went wrong: `code` is an errno value, or 0 when the failure is not a
/// system call's (a corrupt frame, an invalid policy).
struct failure {
  int code = 0;
  std::string message;

  /// The message, followed by the errno text when there is one.
  std::string describe() const {
    if (code == 0)
      return message;
    return message + ": " + std::strerror(code);
  }

  /// Prefixes the message with `context` ("spawn worker 3: " + message).
  failure wrap(const std::string& context) const {
    return failure{code, context + ": " + message};
  }
};

/// A failure of the system call `what`, carrying the current errno.
inline failure errno_failure(std::string what, int err = errno) {
  return failure{err, std::move(what)};
}

/// A failure that is not a system call's.
inline failure logic_failure(std::string what) {
  return failure{0, std::move(what)};
}

/// Either a `T` or a `failure`. Small on purpose: no exceptions on the paths
/// that handle hostile input.
template <class T>
class outcome {
public:
  outcome(T value) : state_(std::in_place_index<0>, std::move(value)) {}
  outcome(failure err) : state_(std::in_place_index<1>, std::move(err)) {}

  explicit operator bool() const noexcept { return state_.index() == 0; }
  bool has_value() const noexcept { return state_.index() == 0; }

  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const failure& error() const { return std::get<1>(state_); }

private:
  std::variant<T, failure> state_;
};

/// The `void` case: success, or a failure.
template <>
class outcome<void> {
public:
  outcome() = default;
  outcome(failure err) : err_(std::move(err)), ok_(false) {}

  explicit operator bool() const noexcept { return ok_; }
  bool has_value() const noexcept { return ok_; }
  const failure& error() const { return err_; }

private:
  failure err_;
  bool ok_ = true;
};

} // namespace castellan
