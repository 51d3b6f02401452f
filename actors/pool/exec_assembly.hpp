#pragma once

/// @file exec_assembly.hpp
/// Builds an exec_result from the frames a worker sends about one request:
/// output appended under the caps, the RESULT payload parsed as hostile JSON.

#include <cstdint>
#include <string>
#include <string_view>

#include "actors/exec_messages.hpp"
#include "ipc/result.hpp"

namespace castellan {

/// Appends `chunk` to `out` up to `limit` bytes in total; sets `truncated`
/// when anything had to be dropped.
void append_capped(std::string& out, bool& truncated, std::string_view chunk, uint64_t limit);

/// Applies a RESULT payload (`{"exit_code": n, "exception": null | {…}}`) to
/// `result`: exit code, exception and error class. Any deviation from that
/// shape is a failure naming the field — the worker broke the protocol.
outcome<void> apply_result_payload(std::string_view payload, exec_result& result);

} // namespace castellan
