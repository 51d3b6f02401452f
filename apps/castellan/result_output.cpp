#include "apps/castellan/result_output.hpp"

#include <unistd.h>

#include <cerrno>
#include <iostream>
#include <string_view>

#include "actors/exec_json.hpp"

namespace castellan::cli {

namespace {

/// Writes all of `data` to `fd` (stdout/stderr carry arbitrary bytes).
void write_all(int fd, std::string_view data) {
  const char* p = data.data();
  std::size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

} // namespace

void print_result(const exec_result& r, bool json) {
  if (json) {
    write_all(STDOUT_FILENO, dump_json(to_json(r), 2) + "\n");
    return;
  }
  print_result_rest(r, 0, 0);
}

void print_output(bool is_stderr, std::string_view data) {
  write_all(is_stderr ? STDERR_FILENO : STDOUT_FILENO, data);
}

void print_result_rest(const exec_result& r, std::size_t stdout_done, std::size_t stderr_done) {
  if (stdout_done < r.stdout_data.size())
    write_all(STDOUT_FILENO, std::string_view(r.stdout_data).substr(stdout_done));
  if (stderr_done < r.stderr_data.size())
    write_all(STDERR_FILENO, std::string_view(r.stderr_data).substr(stderr_done));
  if (r.has_exception && r.stderr_data.find(r.exception.traceback) == std::string::npos)
    write_all(STDERR_FILENO, r.exception.traceback);
  if (r.stdout_truncated)
    std::cerr << "castellan: stdout truncated\n";
  if (r.stderr_truncated)
    std::cerr << "castellan: stderr truncated\n";
  if (r.error != error_class::ok && r.error != error_class::exception)
    std::cerr << "castellan: " << to_string(r.error)
              << (r.detail.empty() ? std::string() : ": " + r.detail) << "\n";
  else if (!r.detail.empty()) // castellan's note on a result that ran
    std::cerr << "castellan: " << r.detail << "\n";
}

std::string pool_line(const pool_status& p) {
  return "pool " + p.name + ": " + std::to_string(p.size) + " workers (" +
         std::to_string(p.idle) + " idle, " + std::to_string(p.busy) + " busy, " +
         std::to_string(p.starting) + " starting), " + std::to_string(p.queued) + " queued of " +
         std::to_string(p.queue_limit) + ", " + std::to_string(p.spawned) + " spawned, " +
         std::to_string(p.completed) + " execs, " + std::to_string(p.lost) + " lost";
}

} // namespace castellan::cli
