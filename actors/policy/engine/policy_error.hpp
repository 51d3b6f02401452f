#pragma once

/// @file policy_error.hpp
/// What is wrong with a policy, precisely enough to fix it: the file, the
/// JSON pointer of the offending value, the value itself and the rule it
/// breaks. Loading reports every error it finds, not just the first.

#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "ipc/outcome.hpp"

namespace castellan::policy {

/// One problem in one policy file.
struct policy_error {
  std::string file;    ///< the policy file (or "<input>" for in-memory text)
  std::string pointer; ///< RFC 6901 JSON pointer of the offending value ("" = the document)
  std::string value;   ///< the offending value as compact JSON, shortened when long
  std::string message; ///< the rule it breaks

  /// "file: pointer: value: message" (the pointer "" prints as "/").
  std::string describe() const;
};

/// Either a `T` or every error found while producing it.
template <class T> class validated {
public:
  validated(T value) : state_(std::in_place_index<0>, std::move(value)) {}
  validated(std::vector<policy_error> errors) : state_(std::in_place_index<1>, std::move(errors)) {}
  validated(policy_error error) : state_(std::in_place_index<1>, std::vector<policy_error>{}) {
    std::get<1>(state_).push_back(std::move(error));
  }

  explicit operator bool() const noexcept { return state_.index() == 0; }
  bool has_value() const noexcept { return state_.index() == 0; }

  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const std::vector<policy_error>& errors() const { return std::get<1>(state_); }

  /// The errors as one `failure` (one error per line), for outcome-based callers.
  failure to_failure() const {
    std::string text;
    for (const auto& e : errors()) {
      if (!text.empty())
        text += '\n';
      text += e.describe();
    }
    return logic_failure(std::move(text));
  }

private:
  std::variant<T, std::vector<policy_error>> state_;
};

} // namespace castellan::policy
