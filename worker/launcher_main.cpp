/// @file launcher_main.cpp
/// castellan-launcher: a pool's warm start. It starts the interpreter and
/// imports the harness once, then, for each request from its pool
/// (platform/linux/launch_request.hpp), clones itself into a new worker's
/// namespaces as that worker's PID 1, which builds the sandbox exactly as
/// castellan-worker does (worker_main.cpp) and whose interpreter process
/// runs the harness in the inherited interpreter instead of exec'ing Python.
/// The new worker is the pool's child (CLONE_PARENT), not the launcher's.
///
///     castellan-launcher --python /usr/bin/python3 --harness <host path of
///                        castellan_harness.py> --socket-fd N
///
/// It runs no request's code itself, ends when its socket closes, and
/// exits 2 for a bad command line, 1 when the interpreter did not start
/// (after saying why on the socket).

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "platform/linux/fd_passing.hpp"
#include "platform/linux/launch_request.hpp"
#include "platform/spawn_worker.hpp"
#include "worker/process_title.hpp"
#include "worker/warm_interpreter.hpp"
#include "worker/worker_main.hpp"

namespace {

using namespace castellan;

/// A launched worker's PID 1: castellan-worker's body, with the harness run
/// warm.
int launched_worker_main(int argc, char** argv) {
  worker::set_process_title({argv, argv + argc});
  return worker::run_worker(argc, argv, &worker::warm_harness);
}

struct launcher_options {
  std::string python;
  std::string harness;
  int socket_fd = -1;
};

bool parse(int argc, char** argv, launcher_options& o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--python") {
      o.python = value;
    } else if (flag == "--harness") {
      o.harness = value;
    } else if (flag == "--socket-fd") {
      char* end = nullptr;
      const long fd = std::strtol(value.c_str(), &end, 10);
      if (end == value.c_str() || *end != '\0' || fd < 3 || fd > 1024)
        return false;
      o.socket_fd = static_cast<int>(fd);
    } else {
      return false;
    }
  }
  return argc % 2 == 1 && !o.python.empty() && !o.harness.empty() && o.socket_fd >= 0 &&
         ::fcntl(o.socket_fd, F_GETFD) >= 0;
}

void send_reply(int sock, const platform::launch_reply& r, int pidfd = -1) {
  const std::string text = platform::encode_launch_reply(r);
  if (auto sent = platform::send_message(sock, text, &pidfd, pidfd >= 0 ? 1 : 0); !sent)
    std::fprintf(stderr, "castellan-launcher: %s\n", sent.error().describe().c_str());
}

/// Starts one worker for `msg`; the reply says which or why not.
void serve(int sock, platform::received_message& msg) {
  platform::launch_reply reply;
  auto spec = platform::decode_launch_request(msg.payload, msg.fds);
  if (!spec) {
    reply.error = spec.error().describe();
    send_reply(sock, reply);
    return;
  }
  if (spec->isolation != platform::isolation_mode::namespaces) {
    reply.error = "launch request: only sandboxed workers are launched warm";
    send_reply(sock, reply);
    return;
  }
  platform::in_process_start start;
  start.main = &launched_worker_main;
  start.sibling = true;
  start.on_cloned = [sock](pid_t pid) {
    platform::launch_reply cloned;
    cloned.what = platform::launch_reply::kind::cloned;
    cloned.pid = pid;
    send_reply(sock, cloned);
  };
  worker::interpreter_before_fork();
  auto child = platform::spawn_worker(*spec, &start);
  worker::interpreter_after_fork();
  if (!child) {
    reply.error = child.error().message;
    reply.error_code = child.error().code;
    send_reply(sock, reply);
    return;
  }
  reply.what = platform::launch_reply::kind::started;
  reply.pid = child->pid;
  send_reply(sock, reply, child->pidfd.get());
}

} // namespace

int main(int argc, char** argv) {
  worker::remember_title_area(argc, argv);
  launcher_options opts;
  if (!parse(argc, argv, opts)) {
    std::fputs("usage: castellan-launcher --python PATH --harness PATH --socket-fd N\n", stderr);
    return 2;
  }
  // Nothing of the host's working directory is inherited by the workers.
  if (::chdir("/") != 0)
    return 1;
  if (auto ok = worker::start_warm_interpreter(opts.python, opts.harness); !ok) {
    platform::launch_reply r;
    r.error = ok.error().describe();
    send_reply(opts.socket_fd, r);
    std::fprintf(stderr, "castellan-launcher: %s\n", r.error.c_str());
    return 1;
  }
  platform::launch_reply hello;
  hello.what = platform::launch_reply::kind::ready;
  hello.pid = ::getpid();
  send_reply(opts.socket_fd, hello);
  for (;;) {
    auto msg = platform::receive_message(opts.socket_fd, platform::max_launch_message,
                                         platform::max_fds_per_message);
    if (!msg) {
      if (msg.error().code != 0) { // the socket itself failed
        std::fprintf(stderr, "castellan-launcher: %s\n", msg.error().describe().c_str());
        return 1;
      }
      platform::launch_reply r; // a malformed request: refused, and the next one served
      r.error = msg.error().describe();
      send_reply(opts.socket_fd, r);
      continue;
    }
    if (msg->closed)
      return 0;
    serve(opts.socket_fd, *msg);
  }
}
