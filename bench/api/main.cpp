/// @file main.cpp
/// bench_api [iterations]: `POST /v1/exec` of `pass` over the API's unix
/// socket against the same request through the embedded actor API, side by
/// side in one run: one shared-mode pool of 4 without a policy (as
/// bench_exec_latency's shared rows), 1 client and 16 clients. The two are
/// run in alternating blocks so that both see the same machine load. The
/// clients keep their connection alive, as a client library would. Then
/// the first byte of the answer to `print(1)` followed by a 20 ms sleep,
/// streamed (`Accept: text/event-stream`: the printed line's event) against
/// plain (the whole result, after the sleep), one for one.

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>

#include "actors/api/api_service.hpp"
#include "actors/interfaces.hpp"
#include "support/api_client.hpp"
#include "support/percentiles.hpp"

namespace {

using namespace castellan;
using clock_type = std::chrono::steady_clock;
using bench::api_client;

double micros_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::micro>(clock_type::now() - t0).count();
}

struct row {
  bench::samples latency;
  double seconds = 0;
  std::size_t errors = 0;
};

/// `clients` threads, `per_client` requests each, through the API (or the
/// actor API when `socket` is empty); appends to `out`.
void run_block(caf::actor_system& sys, const supervisor_actor& sup, const std::string& socket,
               int clients, int per_client, row& out) {
  std::mutex m;
  std::vector<std::thread> threads;
  const auto t0 = clock_type::now();
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&] {
      bench::samples mine;
      std::size_t errors = 0;
      if (socket.empty()) {
        caf::scoped_actor self{sys};
        for (int i = 0; i < per_client; ++i) {
          exec_request req;
          req.code = "pass";
          const auto t = clock_type::now();
          self->request(sup, caf::infinite, exec_atom::value, std::move(req))
              .receive([&](exec_result& r) { errors += r.error != error_class::ok; },
                       [&](caf::error&) { ++errors; });
          mine.add(micros_since(t));
        }
      } else {
        api_client client(socket);
        for (int i = 0; i < per_client; ++i) {
          const auto t = clock_type::now();
          errors += !client.exec_pass();
          mine.add(micros_since(t));
        }
      }
      std::lock_guard<std::mutex> guard(m);
      out.latency.merge(mine);
      out.errors += errors;
    });
  for (auto& t : threads)
    t.join();
  out.seconds += std::chrono::duration<double>(clock_type::now() - t0).count();
}

/// One `POST /v1/exec` of `print(1)` then a 20 ms sleep, on a fresh
/// connection (a streamed answer closes its connection): the time until the
/// printed line's `stdout` event (streamed) or the answer's first byte
/// (plain), and whether the answer was whole and right.
double first_byte_us(const std::string& socket, bool streamed, bool& as_expected) {
  const std::string body = R"json({"code":"print(1)\nimport time\ntime.sleep(0.02)"})json";
  const std::string req = std::string("POST /v1/exec HTTP/1.1\r\nHost: localhost\r\n") +
                          "Content-Type: application/json\r\n" +
                          (streamed ? "Accept: text/event-stream\r\n" : "") +
                          "Connection: close\r\nContent-Length: " + std::to_string(body.size()) +
                          "\r\n\r\n" + body;
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket.c_str(), socket.size() + 1);
  as_expected = false;
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (fd >= 0)
      ::close(fd);
    return 0;
  }
  const auto t = clock_type::now();
  std::string in;
  double first = 0;
  char buf[65536];
  if (::write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n <= 0)
        break;
      const bool started = !in.empty();
      in.append(buf, static_cast<std::size_t>(n));
      // Plain: the answer's first byte. Streamed: the head goes out with
      // the first event, but may arrive in a read of its own.
      if (first == 0 && (streamed ? in.find("event: stdout") != std::string::npos : !started))
        first = micros_since(t);
    }
  }
  ::close(fd);
  as_expected = first > 0 && in.find(R"("error_class":"ok")") != std::string::npos &&
                in.find(R"("stdout":"1\n")") != std::string::npos;
  return first;
}

void print(const char* what, row& r) {
  std::printf("%-44s %8.1f %8.1f %10.0f %6zu\n", what, r.latency.percentile(0.5),
              r.latency.percentile(0.99), static_cast<double>(r.latency.size()) / r.seconds,
              r.errors);
}

} // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 5000;
  if (iterations < 160) {
    std::fprintf(stderr, "usage: bench_api [iterations >= 160]\n");
    return 2;
  }
  caf::actor_system_config cfg;
  prepare_actor_system_config(cfg);
  caf::actor_system sys{cfg};
  supervisor_config sc;
  pool_config pc;
  pc.size = 4;
  pc.mode = exec_mode::shared;
  sc.pools.push_back(pc);
  auto sup = spawn_supervisor(sys, sc);
  if (!sup) {
    std::fprintf(stderr, "bench: %s\n", sup.error().describe().c_str());
    return 2;
  }
  char dir[] = "/tmp/castellan-bench-api-XXXXXX";
  if (::mkdtemp(dir) == nullptr) {
    std::perror("bench: mkdtemp");
    return 2;
  }
  const std::string socket = std::string(dir) + "/api.sock";
  api::api_options opts;
  api::listen_address addr;
  addr.path = socket;
  opts.listen.push_back(addr);
  auto service = api::api_service::start(sys, *sup, opts);
  if (!service) {
    std::fprintf(stderr, "bench: %s\n", service.error().describe().c_str());
    return 2;
  }
  std::printf("%u cores; shared-mode pool of 4, 'pass', %d requests per row\n",
              std::thread::hardware_concurrency(), iterations);
  std::printf("%-44s %8s %8s %10s %6s\n", "", "p50 us", "p99 us", "execs/s", "errors");
  for (int clients : {1, 16}) {
    row embedded;
    row over_api;
    // Warm-up of both paths.
    row warm;
    run_block(sys, *sup, {}, clients, 20, warm);
    run_block(sys, *sup, socket, clients, 20, warm);
    const int blocks = 10;
    const int per_client = iterations / blocks / clients;
    for (int b = 0; b < blocks; ++b) {
      run_block(sys, *sup, {}, clients, per_client, embedded);
      run_block(sys, *sup, socket, clients, per_client, over_api);
    }
    const std::string e = "embedded (actor API), " + std::to_string(clients) + " client(s)";
    const std::string a = "POST /v1/exec (unix socket), " + std::to_string(clients) + " client(s)";
    print(e.c_str(), embedded);
    print(a.c_str(), over_api);
    std::printf("%-44s %8.1f\n", "API overhead at p50, us",
                over_api.latency.percentile(0.5) - embedded.latency.percentile(0.5));
  }
  {
    // Streamed against plain, one for one.
    bench::samples streamed;
    bench::samples plain;
    std::size_t errors = 0;
    const int n = std::max(10, iterations / 100);
    for (int i = 0; i < n; ++i) {
      bool ok = false;
      streamed.add(first_byte_us(socket, true, ok));
      errors += !ok;
      plain.add(first_byte_us(socket, false, ok));
      errors += !ok;
    }
    std::printf("\nfirst byte of the answer to print(1) then sleep(0.02), %d of each, %zu errors\n",
                n, errors);
    std::printf("%-44s %8s %8s\n", "", "p50 us", "p99 us");
    std::printf("%-44s %8.1f %8.1f\n", "Accept: text/event-stream (stdout event)",
                streamed.percentile(0.5), streamed.percentile(0.99));
    std::printf("%-44s %8.1f %8.1f\n", "plain (the whole result)", plain.percentile(0.5),
                plain.percentile(0.99));
  }
  (*service)->stop();
  ::rmdir(dir);
  caf::anon_send(*sup, shutdown_atom::value);
  return 0;
}
