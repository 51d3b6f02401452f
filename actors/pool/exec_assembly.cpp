#include "actors/pool/exec_assembly.hpp"

#include <limits>

#include <nlohmann/json.hpp>

namespace castellan {

void append_capped(std::string& out, bool& truncated, std::string_view chunk, uint64_t limit) {
  const uint64_t room = out.size() >= limit ? 0 : limit - out.size();
  if (chunk.size() > room) {
    truncated = true;
    chunk = chunk.substr(0, static_cast<std::size_t>(room));
  }
  out.append(chunk.data(), chunk.size());
}

namespace {

outcome<std::string> string_field(const nlohmann::json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null())
    return std::string{};
  if (!it->is_string())
    return logic_failure(std::string("RESULT: exception.") + key + " is not a string");
  return it->get<std::string>();
}

/// RESULT's `exec_error`: `{"program": "/usr/bin/id", "errno": 13}`, nothing
/// more, nothing less.
outcome<harness_exec_error> exec_error_field(const nlohmann::json& value) {
  if (!value.is_object() || value.size() != 2)
    return logic_failure("RESULT: exec_error is not an object of program and errno");
  auto program = value.find("program");
  if (program == value.end() || !program->is_string() ||
      program->get_ref<const std::string&>().empty())
    return logic_failure("RESULT: exec_error.program missing or not a non-empty string");
  auto number = value.find("errno");
  // Linux errnos are 1..4095 (the range a raw syscall returns negated).
  if (number == value.end() || !number->is_number_integer() || number->get<int64_t>() < 1 ||
      number->get<int64_t>() > 4095)
    return logic_failure("RESULT: exec_error.errno missing or not an errno (1..4095)");
  return harness_exec_error{program->get<std::string>(), static_cast<int>(number->get<int64_t>())};
}

} // namespace

outcome<void> apply_result_payload(std::string_view payload, exec_result& result) {
  result_extras ignored;
  return apply_result_payload(payload, result, ignored);
}

outcome<void> apply_result_payload(std::string_view payload, exec_result& result,
                                   result_extras& extras) {
  auto doc = nlohmann::json::parse(payload.begin(), payload.end(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    return logic_failure("RESULT: payload is not a JSON object");
  if (auto it = doc.find("refused"); it != doc.end()) {
    if (!it->is_string())
      return logic_failure("RESULT: refused is not a string");
    extras.refused = it->get<std::string>();
  }
  if (auto it = doc.find("retire"); it != doc.end()) {
    if (!it->is_string())
      return logic_failure("RESULT: retire is not a string");
    extras.retire = it->get<std::string>();
  }
  if (auto it = doc.find("tightening"); it != doc.end()) {
    if (!it->is_object())
      return logic_failure("RESULT: tightening is not an object");
    extras.tightening = it->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  if (auto it = doc.find("exec_error"); it != doc.end()) {
    auto parsed = exec_error_field(*it);
    if (!parsed)
      return parsed.error();
    extras.exec_error = std::move(*parsed);
  }
  auto code = doc.find("exit_code");
  if (code == doc.end() || !code->is_number_integer())
    return logic_failure("RESULT: exit_code missing or not an integer");
  const auto value = code->get<int64_t>();
  if (value < std::numeric_limits<int32_t>::min() || value > std::numeric_limits<int32_t>::max())
    return logic_failure("RESULT: exit_code " + std::to_string(value) + " out of range");
  result.exit_code = static_cast<int32_t>(value);
  result.error = error_class::ok;
  auto exc = doc.find("exception");
  if (exc == doc.end() || exc->is_null())
    return {};
  if (!exc->is_object())
    return logic_failure("RESULT: exception is neither null nor an object");
  auto type = string_field(*exc, "type");
  auto message = string_field(*exc, "message");
  auto traceback = string_field(*exc, "traceback");
  for (auto* f : {&type, &message, &traceback})
    if (!*f)
      return f->error();
  result.has_exception = true;
  result.exception = exception_info{std::move(*type), std::move(*message), std::move(*traceback)};
  result.error = error_class::exception;
  return {};
}

} // namespace castellan
