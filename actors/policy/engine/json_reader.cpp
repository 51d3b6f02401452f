#include "actors/policy/engine/json_reader.hpp"

#include <set>
#include <vector>

namespace castellan::policy {

namespace {

using json = nlohmann::json;

/// SAX pass that checks structure before the document is built.
class structure_checker final : public nlohmann::json_sax<json> {
public:
  explicit structure_checker(std::string_view file) : file_(file) {}

  std::vector<policy_error> errors;

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }

  bool start_object(std::size_t) override { return open(false); }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(true); }
  bool end_array() override { return close(); }

  bool key(string_t& name) override {
    auto& top = frames_.back();
    top.key = name;
    if (!top.keys.insert(name).second) {
      errors.push_back(policy_error{std::string{file_}, pointer_of_current(), "",
                                    "duplicate key \"" + name + "\" (json)"});
      return false;
    }
    return true;
  }

  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    std::string what = ex.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 2: …"
    if (auto close = what.find("] "); close != std::string::npos)
      what.erase(0, close + 2);
    errors.push_back(policy_error{std::string{file_}, "", "",
                                  what + " (byte " + std::to_string(position) + ", json)"});
    return false;
  }

private:
  struct frame {
    bool is_array = false;
    size_t index = 0; ///< next element index (arrays)
    std::string key;  ///< current key (objects)
    std::set<std::string> keys;
  };

  // The pointer of the element being read inside the innermost container.
  std::string pointer_of_current() const {
    std::string out;
    for (const auto& f : frames_)
      out = append_pointer(std::move(out), f.is_array ? std::to_string(f.index) : f.key);
    return out;
  }

  bool value() {
    if (!frames_.empty() && frames_.back().is_array)
      ++frames_.back().index;
    return true;
  }

  bool open(bool is_array) {
    if (frames_.size() >= max_json_depth) {
      errors.push_back(
          policy_error{std::string{file_}, pointer_of_current(), "",
                       "nesting deeper than " + std::to_string(max_json_depth) + " levels (json)"});
      return false;
    }
    frames_.push_back(frame{is_array, 0, {}, {}});
    return true;
  }

  bool close() {
    frames_.pop_back();
    return value();
  }

  std::string_view file_;
  std::vector<frame> frames_;
};

} // namespace

std::string append_pointer(std::string pointer, std::string_view token) {
  pointer += '/';
  for (char c : token) {
    if (c == '~')
      pointer += "~0";
    else if (c == '/')
      pointer += "~1";
    else
      pointer += c;
  }
  return pointer;
}

std::string render_value(const nlohmann::json& value, size_t limit) {
  // Replace invalid UTF-8 instead of throwing: the text is hostile.
  std::string out = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (out.size() > limit) {
    out.resize(limit);
    out += "…";
  }
  return out;
}

validated<nlohmann::json> read_json(std::string_view text, std::string_view file) {
  if (text.size() > max_policy_bytes)
    return policy_error{std::string{file}, "", "",
                        "policy is " + std::to_string(text.size()) + " bytes, more than the " +
                            std::to_string(max_policy_bytes) + " allowed (json)"};
  try {
    structure_checker checker{file};
    const bool ok = json::sax_parse(text.begin(), text.end(), &checker);
    if (!ok || !checker.errors.empty()) {
      if (checker.errors.empty())
        checker.errors.push_back(policy_error{std::string{file}, "", "", "invalid JSON (json)"});
      return std::move(checker.errors);
    }
    json doc = json::parse(text.begin(), text.end(), nullptr, false);
    if (doc.is_discarded())
      return policy_error{std::string{file}, "", "", "invalid JSON (json)"};
    return doc;
  } catch (const std::exception& ex) {
    // nlohmann reports some input errors (e.g. bad UTF-8) by throwing.
    return policy_error{std::string{file}, "", "", std::string{"invalid JSON: "} + ex.what()};
  }
}

} // namespace castellan::policy
