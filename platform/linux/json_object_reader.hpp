#pragma once

/// @file json_object_reader.hpp
/// Reading a JSON document written by another castellan process (the sealed
/// sandbox spec, the launcher's requests) into C++ values, strictly: every
/// error names the JSON pointer of what is wrong, and unknown keys are
/// errors too.

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace castellan::platform {

/// Reads one JSON object's fields into C++ values. The first error wins and
/// later calls do nothing; unknown keys are reported by finish().
class object_reader {
public:
  using json = nlohmann::json;

  object_reader(const json& j, std::string path, std::string& err)
    : j_(j), path_(std::move(path)), err_(err) {
    if (err_.empty() && !j_.is_object())
      fail(path_, "expected an object");
  }

  void boolean(const char* key, bool& out) {
    if (const json* v = field(key, json::value_t::boolean, "a boolean"))
      out = v->get<bool>();
  }

  void string(const char* key, std::string& out) {
    if (const json* v = field(key, json::value_t::string, "a string"))
      out = v->get<std::string>();
  }

  template <class T>
  void unsigned_number(const char* key, T& out) {
    const json* v = present(key);
    if (!v)
      return;
    if (!v->is_number_unsigned() ||
        v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
      fail(path_ + "/" + key, "expected an unsigned integer up to " +
                                std::to_string(std::numeric_limits<T>::max()));
      return;
    }
    out = static_cast<T>(v->get<uint64_t>());
  }

  template <class T>
  void signed_number(const char* key, T& out) {
    const json* v = present(key);
    if (!v)
      return;
    if (!v->is_number_integer() ||
        v->get<int64_t>() < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
        v->get<int64_t>() > static_cast<int64_t>(std::numeric_limits<T>::max())) {
      fail(path_ + "/" + key, "expected an integer");
      return;
    }
    out = static_cast<T>(v->get<int64_t>());
  }

  void strings(const char* key, std::vector<std::string>& out) {
    const json* v = field(key, json::value_t::array, "an array of strings");
    if (!v)
      return;
    out.clear();
    for (std::size_t i = 0; i < v->size(); ++i) {
      if (!(*v)[i].is_string()) {
        fail(path_ + "/" + key + "/" + std::to_string(i), "expected a string");
        return;
      }
      out.push_back((*v)[i].get<std::string>());
    }
  }

  /// An array of right names → a mask, through `lookup`.
  template <class Lookup>
  void rights(const char* key, uint64_t& out, Lookup lookup) {
    std::vector<std::string> names;
    const bool had = present(key) != nullptr;
    strings(key, names);
    if (!had || !err_.empty())
      return;
    uint64_t mask = 0;
    for (std::size_t i = 0; i < names.size(); ++i) {
      auto bit = lookup(names[i]);
      if (!bit) {
        fail(path_ + "/" + key + "/" + std::to_string(i), "unknown right '" + names[i] + "'");
        return;
      }
      mask |= *bit;
    }
    out = mask;
  }

  /// Calls `each(element, element_path)` for every element of an array.
  template <class F>
  void array(const char* key, F each) {
    const json* v = field(key, json::value_t::array, "an array");
    if (!v)
      return;
    for (std::size_t i = 0; i < v->size() && err_.empty(); ++i)
      each((*v)[i], path_ + "/" + key + "/" + std::to_string(i));
  }

  /// A nested object, or nullptr when absent (or on error).
  const json* object(const char* key) { return field(key, json::value_t::object, "an object"); }

  /// A nested array to read element by element, or nullptr when absent (or on error).
  const json* array_value(const char* key) {
    return field(key, json::value_t::array, "an array");
  }

  /// Each of `keys` must be present (a required field).
  void require(std::initializer_list<const char*> keys) {
    for (const char* key : keys) {
      if (!err_.empty() || !j_.is_object())
        return;
      if (j_.find(key) == j_.end())
        fail(path_ + "/" + key, "missing");
    }
  }

  void finish() {
    if (!err_.empty() || !j_.is_object())
      return;
    for (auto it = j_.begin(); it != j_.end(); ++it)
      if (!known_.count(it.key())) {
        fail(path_ + "/" + it.key(), "unknown key");
        return;
      }
  }

  void fail(const std::string& where, const std::string& what) {
    if (err_.empty())
      err_ = (where.empty() ? "/" : where) + ": " + what;
  }

private:
  const json* present(const char* key) {
    known_.insert(key);
    if (!err_.empty() || !j_.is_object())
      return nullptr;
    auto it = j_.find(key);
    return it == j_.end() ? nullptr : &*it;
  }

  const json* field(const char* key, json::value_t type, const char* expected) {
    const json* v = present(key);
    if (v && v->type() != type) {
      fail(path_ + "/" + key, std::string("expected ") + expected);
      return nullptr;
    }
    return v;
  }

  const json& j_;
  std::string path_;
  std::string& err_;
  std::set<std::string> known_;
};

} // namespace castellan::platform
