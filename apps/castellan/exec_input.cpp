#include "apps/castellan/exec_input.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include <CLI/CLI.hpp>

#include "actors/pool/exec_setup.hpp"
#include "apps/castellan/file_transfer.hpp"

namespace castellan::cli {

namespace {

/// Reads all of `in` into `out`; false (having said why) when it fails.
bool slurp(std::istream& in, const std::string& what, std::string& out) {
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) {
    std::cerr << "castellan: cannot read " << what << "\n";
    return false;
  }
  out = ss.str();
  return true;
}

} // namespace

void add_input_flags(CLI::App* cmd, exec_input& in) {
  cmd->add_option("-e,--env", in.env, "Set an environment variable of the exec: -e NAME=VALUE "
                                      "(repeatable)")
    ->allow_extra_args(false); // one NAME=VALUE per -e: the code may follow
  cmd->add_option("-w,--workdir", in.workdir,
                  "The directory the code or program starts in (an absolute path in the "
                  "sandbox)");
  cmd->add_flag("--stdin", in.forward_stdin, "Pass this command's stdin to the exec's stdin");
  cmd->add_option("--file-in", in.file_in,
                  "Write the local file LOCAL into the sandbox before the exec runs: "
                  "--file-in LOCAL[:PATH] (PATH relative to the working directory, else /tmp, or "
                  "absolute below /tmp or it; default: LOCAL's name; repeatable)")
    ->allow_extra_args(false);
  cmd->add_option("--file-out", in.file_out,
                  "Bring the sandbox's file PATH back once the exec has ended: --file-out "
                  "PATH[:LOCAL] (default LOCAL: PATH's name in the current directory; "
                  "repeatable)")
    ->allow_extra_args(false);
}

bool add_setup(exec_input& in, exec_request& req) {
  req.env = in.env;
  req.cwd = in.workdir;
  if (in.forward_stdin && !slurp(std::cin, "stdin", req.stdin_data))
    return false;
  in.file_out_locals.clear();
  if (!add_files_in(in.file_in, req) || !add_files_out(in.file_out, req, in.file_out_locals))
    return false;
  if (auto why = check_setup(req); !why.empty()) {
    std::cerr << "castellan: " << why << "\n";
    return false;
  }
  return true;
}

bool load_code(exec_input& in, const std::string& command) {
  if (!in.file.empty() && !in.code.empty()) {
    std::cerr << "castellan " << command << ": give CODE or -f FILE, not both\n";
    return false;
  }
  if (!in.file.empty()) {
    std::ifstream f(in.file, std::ios::binary);
    if (!f) {
      std::cerr << "castellan " << command << ": cannot open '" << in.file
                << "': " << std::strerror(errno) << "\n";
      return false;
    }
    return slurp(f, in.file, in.code);
  }
  if (in.code == "-") {
    if (in.forward_stdin) {
      std::cerr << "castellan " << command
                << ": the code and the exec's stdin cannot both come from stdin\n";
      return false;
    }
    return slurp(std::cin, "stdin", in.code);
  }
  if (in.code.empty()) {
    std::cerr << "castellan " << command << ": no code given (CODE, -f FILE or - for stdin)\n";
    return false;
  }
  return true;
}

} // namespace castellan::cli
