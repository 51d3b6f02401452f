#pragma once

/// @file file_transfer.hpp
/// `--file-in LOCAL[:PATH]` and `--file-out PATH[:LOCAL]` of `castellan exec`
/// and `run`: local files into the request's files_in, and the result's
/// files written back to local files, embedded and with --connect alike.

#include <string>
#include <vector>

#include "actors/exec_messages.hpp"

namespace castellan::cli {

/// Reads each `LOCAL[:PATH]` (PATH in the sandbox; default: LOCAL's last
/// component, relative to the exec's working directory) into
/// `req.files_in`, with LOCAL's permission bits. False, having said why,
/// when a file cannot be read.
bool add_files_in(const std::vector<std::string>& specs, exec_request& req);

/// Each `PATH[:LOCAL]` into `req.files_out`, and where its content goes
/// into `locals` (default: PATH's last component, in the current
/// directory). False, having said why, when a spec is empty.
bool add_files_out(const std::vector<std::string>& specs, exec_request& req,
                   std::vector<std::string>& locals);

/// Writes each of `r.files` that came back to its local path; says on
/// stderr which did not (and why), or could not be written. True when all
/// were written.
bool save_files_out(const exec_result& r, const std::vector<std::string>& locals);

} // namespace castellan::cli
