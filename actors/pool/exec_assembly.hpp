#pragma once

/// @file exec_assembly.hpp
/// Builds an exec_result from the frames a worker sends about one request:
/// output appended under the caps, the RESULT payload parsed as hostile JSON.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "actors/exec_messages.hpp"
#include "actors/pool/harness_exec_error.hpp"
#include "ipc/outcome.hpp"

namespace castellan {

/// Appends `chunk` to `out` up to `limit` bytes in total; sets `truncated`
/// when anything had to be dropped.
void append_capped(std::string& out, bool& truncated, std::string_view chunk, uint64_t limit);

/// Applies a RESULT payload (`{"exit_code": n, "exception": null | {…}}`) to
/// `result`: exit code, exception and error class. Any deviation from that
/// shape is a failure naming the field — the worker broke the protocol.
outcome<void> apply_result_payload(std::string_view payload, exec_result& result);

/// What a RESULT carries beyond the exit code and the exception, for a
/// request that came with a TIGHTEN frame (docs/wire.md).
struct result_extras {
  /// The request was refused before its code ran (its tightening could not
  /// be applied): why.
  std::optional<std::string> refused;
  /// What the exec's process applied, as a JSON object (compact text).
  std::optional<std::string> tightening;
  /// The worker serves no further exec (fork mode: what an exec left could
  /// not be put back): why. The pool replaces it.
  std::optional<std::string> retire;
  /// The harness's own exec of a COMMAND's program failed.
  std::optional<harness_exec_error> exec_error;
};

/// apply_result_payload, also reading `refused` and `retire` (strings),
/// `tightening` (an object) and `exec_error` (an object of exactly a
/// non-empty string `program` and an integer `errno` in 1..4095) into
/// `extras`; any of the wrong type or shape is a failure.
outcome<void> apply_result_payload(std::string_view payload, exec_result& result,
                                   result_extras& extras);

} // namespace castellan
