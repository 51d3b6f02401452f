/// @file files_main.cpp
/// A session's workspace files over the API, side by side with `cp` on the
/// same disk in the same run: a file of N MiB (default 100) uploaded with
/// `PUT /v1/sessions/{id}/files/…` and downloaded with `GET`, over the
/// daemon's unix socket, against `cp` of the same file from the host's
/// temporary directory into the workspace's mount and back out (the same
/// two file systems, the same bytes). Prints MiB/s of each and the ratio.
///
/// Usage: bench_session_files [MiB] [rounds]   (defaults 100 and 3; needs
/// root: the workspace is a mounted ext4 image)

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <caf/all.hpp>

#include "actors/api/api_service.hpp"
#include "actors/interfaces.hpp"

namespace {

using namespace castellan;
using clock_type = std::chrono::steady_clock;
namespace http = boost::beast::http;
using unix_socket = boost::asio::local::stream_protocol::socket;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

/// One request on a fresh connection; the status, and the body into `out`.
unsigned request(const std::string& socket_path, http::verb verb, const std::string& target,
                 std::string body, std::string* out) {
  boost::asio::io_context io;
  unix_socket s(io);
  s.connect(boost::asio::local::stream_protocol::endpoint(socket_path));
  http::request<http::string_body> req{verb, target, 11};
  req.set(http::field::host, "localhost");
  req.set(http::field::content_type, "application/octet-stream");
  req.body() = std::move(body);
  req.prepare_payload();
  http::write(s, req);
  boost::beast::flat_buffer buf;
  http::response_parser<http::string_body> parser;
  parser.body_limit(8ull << 30);
  boost::system::error_code ec;
  http::read(s, buf, parser, ec);
  if (ec)
    return 0;
  if (out != nullptr)
    *out = std::move(parser.get().body());
  return parser.get().result_int();
}

bool run(const char* cmd) { return std::system(cmd) == 0; }

} // namespace

int main(int argc, char** argv) {
  const int mib = argc > 1 ? std::atoi(argv[1]) : 100;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 3;
  if (mib <= 0 || rounds <= 0 || mib > 250) {
    std::fprintf(stderr, "usage: bench_session_files [MiB (1..250)] [rounds]\n");
    return 2;
  }
  char tmpl[] = "/tmp/castellan-bench-files-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  const std::string dir = tmpl;
  caf::actor_system_config cfg;
  prepare_actor_system_config(cfg);
  caf::actor_system sys{cfg};

  supervisor_config sc;
  pool_config pc;
  pc.size = 1;
  pc.mode = exec_mode::shared;
  sc.pools.push_back(pc);
  workspace_config wc;
  wc.store.directory = dir + "/workspaces";
  sc.workspaces = wc;
  auto sup = spawn_supervisor(sys, sc);
  if (!sup) {
    std::fprintf(stderr, "bench_session_files: %s\n", sup.error().describe().c_str());
    return 1;
  }
  int rc = 1;
  {
    api::api_options opts;
    api::listen_address a;
    a.path = dir + "/api.sock";
    opts.listen.push_back(a);
    auto api = api::api_service::start(sys, *sup, std::move(opts));
    caf::scoped_actor self{sys};
    std::string id;
    const uint64_t quota = (static_cast<uint64_t>(mib) * 3 + 64) << 20;
    self->request(*sup, std::chrono::seconds(120), workspace_create_atom::value,
                  std::string("bench"), quota)
      .receive([](workspace_info&) {},
               [&](caf::error& e) { std::fprintf(stderr, "workspace: %s\n", to_string(e).c_str()); });
    session_options so;
    so.workspace = "bench";
    self->request(*sup, std::chrono::seconds(120), session_create_atom::value, so)
      .receive([&](session_info& info) { id = info.id; },
               [&](caf::error& e) { std::fprintf(stderr, "session: %s\n", to_string(e).c_str()); });
    if (api && !id.empty()) {
      const std::string sock = dir + "/api.sock";
      // The API learns of the session from the supervisor's list.
      request(sock, http::verb::get, "/v1/sessions", {}, nullptr);
      std::string data(static_cast<std::size_t>(mib) << 20, '\0');
      for (std::size_t i = 0; i < data.size(); ++i)
        data[i] = static_cast<char>((i * 2654435761u) >> 13);
      const std::string src = dir + "/source.bin";
      const std::string back = dir + "/back.bin";
      const std::string mount = dir + "/workspaces/mounts/bench";
      std::ofstream(src, std::ios::binary).write(data.data(), static_cast<std::streamsize>(data.size()));
      const std::string target = "/v1/sessions/" + id + "/files/blob.bin";
      double put_s = 1e9, get_s = 1e9, cp_in_s = 1e9, cp_out_s = 1e9;
      bool ok = true;
      for (int r = 0; r < rounds && ok; ++r) {
        // cp into the workspace and back out, then the API both ways; the
        // best of each over the rounds.
        auto t0 = clock_type::now();
        ok &= run(("cp " + src + " " + mount + "/cp.bin && sync -f " + mount + "/cp.bin").c_str());
        cp_in_s = std::min(cp_in_s, seconds_since(t0));
        run("echo 3 > /proc/sys/vm/drop_caches 2>/dev/null");
        t0 = clock_type::now();
        ok &= run(("cp " + mount + "/cp.bin " + back).c_str());
        cp_out_s = std::min(cp_out_s, seconds_since(t0));
        t0 = clock_type::now();
        ok &= request(sock, http::verb::put, target, data, nullptr) == 200;
        put_s = std::min(put_s, seconds_since(t0));
        run("echo 3 > /proc/sys/vm/drop_caches 2>/dev/null");
        std::string got;
        t0 = clock_type::now();
        ok &= request(sock, http::verb::get, target, {}, &got) == 200;
        get_s = std::min(get_s, seconds_since(t0));
        ok &= got == data;
        std::filesystem::remove(mount + "/cp.bin");
        std::filesystem::remove(back);
      }
      if (ok) {
        const double m = mib;
        std::printf("%d MiB, best of %d (cp: into the workspace plus sync; out of it, caches dropped)\n",
                    mib, rounds);
        std::printf("%-34s %9.1f MiB/s\n", "upload   PUT …/files (API)", m / put_s);
        std::printf("%-34s %9.1f MiB/s\n", "upload   cp + sync", m / cp_in_s);
        std::printf("%-34s %9.2f\n", "upload   API / cp", cp_in_s / put_s);
        std::printf("%-34s %9.1f MiB/s\n", "download GET …/files (API)", m / get_s);
        std::printf("%-34s %9.1f MiB/s\n", "download cp", m / cp_out_s);
        std::printf("%-34s %9.2f\n", "download API / cp", cp_out_s / get_s);
        rc = 0;
      } else {
        std::fprintf(stderr, "bench_session_files: a transfer failed or came back different\n");
      }
      self->request(*sup, std::chrono::seconds(60), destroy_atom::value, session_ref{id, ""})
        .receive([](session_stats&) {}, [](caf::error&) {});
    }
    if (api)
      (*api)->stop();
  }
  caf::scoped_actor self{sys};
  self->send(*sup, shutdown_atom::value);
  self->wait_for(*sup);
  std::filesystem::remove_all(dir + "/source.bin");
  run(("rm -rf " + dir + " 2>/dev/null").c_str());
  return rc;
}
