#pragma once

/// @file exec_input.hpp
/// What an exec is given from the command line, shared by `castellan
/// exec|run` and `castellan session exec|run`: the code (an argument, a
/// file, or stdin), its environment, working directory, stdin and files.

#include <string>
#include <vector>

#include "actors/exec_messages.hpp"

namespace CLI {
class App;
}

namespace castellan::cli {

struct exec_input {
  std::vector<std::string> env;             ///< -e NAME=VALUE
  std::string workdir;                      ///< -w DIR
  bool forward_stdin = false;               ///< --stdin
  std::vector<std::string> file_in;         ///< --file-in LOCAL[:PATH]
  std::vector<std::string> file_out;        ///< --file-out PATH[:LOCAL]
  std::vector<std::string> file_out_locals; ///< where each --file-out goes
  // code mode
  std::string code; ///< the argument: the source, or "-" for stdin
  std::string file; ///< -f FILE
};

/// Adds -e, -w, --stdin, --file-in and --file-out to `cmd`.
void add_input_flags(CLI::App* cmd, exec_input& in);

/// The code to run into `in.code`: the argument, a file (-f), or stdin
/// ("-"). False, having said why (as `command`), when there is none.
bool load_code(exec_input& in, const std::string& command);

/// The request's environment, working directory, stdin and files from the
/// flags; false (having said why) when they are not usable.
bool add_setup(exec_input& in, exec_request& req);

} // namespace castellan::cli
