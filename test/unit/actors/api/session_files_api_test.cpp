#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "actors/api/api_service.hpp"
#include "actors/api/session_files_routes.hpp"
#include "support/actor_system_fixture.hpp"
#include "support/http_client.hpp"
#include "support/skip.hpp"
#include "support/temp_dir.hpp"
#include "support/workspace_support.hpp"

using namespace castellan;
using namespace castellan::api;
using namespace std::chrono_literals;
using castellan::test::http_client;
using castellan::test::http_reply;
using json = nlohmann::json;

namespace {

/// A real supervisor with a workspace store, the API on a unix socket, and
/// a session bound to the workspace "files" (made through the supervisor:
/// the API does not take a workspace yet).
struct files_api_fixture : test::actor_system_fixture {
  test::temp_dir dir;
  test::mount_sweeper sweeper{dir.path.string()};
  std::string socket_path;
  supervisor_actor sup;
  std::unique_ptr<api_service> api;
  std::string id;

  explicit files_api_fixture(http_limits limits = {}, bool workspace = true) {
    socket_path = dir.file("api.sock");
    supervisor_config sc;
    auto pc = test_pool(1);
    pc.mode = exec_mode::shared;
    sc.pools.push_back(pc);
    workspace_config wc;
    wc.store.directory = dir.file("workspaces");
    sc.workspaces = wc;
    auto s = spawn_supervisor(sys, sc);
    BOOST_REQUIRE_MESSAGE(s, (s ? "" : s.error().describe()));
    sup = *s;
    api_options opts;
    listen_address a;
    a.path = socket_path;
    opts.listen.push_back(a);
    opts.limits = limits;
    auto started = api_service::start(sys, sup, std::move(opts));
    BOOST_REQUIRE_MESSAGE(started, (started ? "" : started.error().describe()));
    api = std::move(*started);
    session_options so;
    if (workspace) {
      self->request(sup, 60s, workspace_create_atom::value, std::string("files"),
                    uint64_t{64} << 20)
        .receive([&](workspace_info&) {}, [&](caf::error& err) { BOOST_FAIL(describe(err, sys)); });
      so.workspace = "files";
    }
    self->request(sup, 60s, session_create_atom::value, so)
      .receive([&](session_info& info) { id = info.id; },
               [&](caf::error& err) { BOOST_FAIL(describe(err, sys)); });
    // The API learns of sessions from the supervisor's list.
    http_client c(socket_path);
    BOOST_REQUIRE(c.get("/v1/sessions").status == 200);
  }
  ~files_api_fixture() {
    if (api)
      api->stop();
    caf::anon_send(sup, shutdown_atom::value);
    self->wait_for(sup);
  }
  std::string host(const std::string& rel) const {
    return dir.file("workspaces/mounts/files/" + rel);
  }

  std::string files(const std::string& path) { return "/v1/sessions/" + id + "/files" + path; }

  http_reply req(const std::string& method, const std::string& target,
                 const std::string& body = {}) {
    http_client c(socket_path);
    return c.request(method, target, body, body.empty() ? "" : "application/octet-stream");
  }

  exec_result exec(const std::string& code) {
    exec_result out;
    exec_request r;
    r.code = code;
    self->request(sup, 60s, exec_atom::value, session_ref{id, ""}, std::move(r))
      .receive([&](exec_result& x) { out = std::move(x); },
               [&](caf::error& e) { BOOST_FAIL(describe(e, sys)); });
    return out;
  }
};

std::string binary(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i)
    s[i] = static_cast<char>((i * 131 + (i >> 9)) & 0xff);
  return s;
}

} // namespace

/// Workspaces need the loop driver and ext4.
#define SKIP_WITHOUT_WORKSPACES()                                                                  \
  if (auto why = test::workspace_kernel_lacks())                                                   \
    return test::skip(*why);

BOOST_AUTO_TEST_SUITE(api_session_files)

BOOST_AUTO_TEST_CASE(put_get_list_stat_mkdir_and_delete_over_http) {
  SKIP_WITHOUT_WORKSPACES();
  files_api_fixture f;
  // Over the 4 MiB of a JSON body: uploads have their own limit.
  const auto bytes = binary((5u << 20) + 3);
  auto put = f.req("PUT", f.files("/data/blob.bin?parents&mode=0600"), bytes);
  BOOST_REQUIRE_MESSAGE(put.status == 200, put.body);
  BOOST_TEST(put.json()["path"] == "/workspace/data/blob.bin");
  BOOST_TEST(put.json()["size"] == bytes.size());
  BOOST_TEST(put.json()["mode"] == "0600");
  auto get = f.req("GET", f.files("/data/blob.bin"));
  BOOST_REQUIRE_MESSAGE(get.status == 200, get.body.substr(0, 200));
  BOOST_TEST(get.content_type == "application/octet-stream");
  BOOST_TEST((get.body == bytes));
  // The code in the session reads it.
  auto r = f.exec("print(len(open('/workspace/data/blob.bin','rb').read()))");
  BOOST_TEST(r.stdout_data == std::to_string(bytes.size()) + "\n");

  BOOST_REQUIRE(f.req("PUT", f.files("/data/sub/deeper?mkdir&parents")).status == 200);
  BOOST_REQUIRE(f.req("PUT", f.files("/empty.txt")).status == 200);
  auto empty = f.req("GET", f.files("/empty.txt"));
  BOOST_TEST(empty.status == 200);
  BOOST_TEST(empty.body.empty());
  auto list = f.req("GET", f.files("/data"));
  BOOST_REQUIRE_MESSAGE(list.status == 200, list.body);
  BOOST_TEST(list.content_type == "application/json");
  auto j = list.json();
  BOOST_TEST(j["type"] == "directory");
  BOOST_REQUIRE(j["entries"].size() == 2u);
  BOOST_TEST(j["entries"][0]["name"] == "blob.bin");
  BOOST_TEST(j["entries"][1]["name"] == "sub");
  BOOST_TEST(j["entries"][1]["type"] == "directory");
  auto root = f.req("GET", f.files(""));
  BOOST_REQUIRE_MESSAGE(root.status == 200, root.body);
  BOOST_TEST(root.json()["path"] == "/workspace");
  auto st = f.req("GET", f.files("/data/blob.bin?stat"));
  BOOST_REQUIRE(st.status == 200);
  BOOST_TEST(st.json()["type"] == "file");
  BOOST_TEST(st.json()["size"] == bytes.size());

  auto not_empty = f.req("DELETE", f.files("/data"));
  BOOST_TEST(not_empty.status == 409);
  BOOST_TEST(not_empty.error_code() == "not_empty");
  auto gone = f.req("DELETE", f.files("/data?recursive"));
  BOOST_REQUIRE_MESSAGE(gone.status == 200, gone.body);
  BOOST_TEST(gone.json()["removed"] == true);
  auto missing = f.req("GET", f.files("/data/blob.bin"));
  BOOST_TEST(missing.status == 404);
  BOOST_TEST(missing.error_code() == "not_found");
  // A percent-encoded name.
  BOOST_REQUIRE(f.req("PUT", f.files("/with%20space.txt"), "x").status == 200);
  struct stat sb{};
  BOOST_TEST(::stat(f.host("with space.txt").c_str(), &sb) == 0);
}

BOOST_AUTO_TEST_CASE(what_the_sandbox_plants_fails_cleanly_and_the_daemon_stays_up) {
  SKIP_WITHOUT_WORKSPACES();
  files_api_fixture f;
  auto r = f.exec("import os\n"
                  "os.symlink('/etc/shadow', '/workspace/shadow')\n"
                  "os.symlink('../../../etc/passwd', '/workspace/passwd')\n"
                  "os.mkfifo('/workspace/fifo')\n"
                  "os.mkdir('/workspace/d')\n"
                  "os.symlink('/etc', '/workspace/d/etc')\n");
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.stderr_data);
  for (const char* p : {"/shadow", "/passwd", "/d/etc/passwd"}) {
    auto g = f.req("GET", f.files(p));
    BOOST_TEST(g.status == 403, p << ": " << g.body);
    BOOST_TEST(g.error_code() == "escapes_workspace");
    BOOST_TEST(g.error_message().find(p) != std::string::npos);
  }
  auto fifo = f.req("GET", f.files("/fifo"));
  BOOST_TEST(fifo.status == 409);
  BOOST_TEST(fifo.error_code() == "not_regular");
  auto dots = f.req("GET", f.files("/%2E%2E/%2E%2E/etc/passwd"));
  BOOST_TEST(dots.status == 400);
  BOOST_TEST(dots.error_code() == "invalid_path");
  auto up = f.req("PUT", f.files("/d/etc/planted"), "x");
  BOOST_TEST(up.status == 403);
  struct stat sb{};
  BOOST_TEST(::stat("/etc/planted", &sb) != 0);
  // The symlink is listed as what it is.
  auto st = f.req("GET", f.files("/shadow?stat"));
  BOOST_REQUIRE(st.status == 200);
  BOOST_TEST(st.json()["type"] == "symlink");
  BOOST_TEST(st.json()["target"] == "/etc/shadow");
  http_client c(f.socket_path);
  BOOST_TEST(c.get("/v1/health").status == 200);
  BOOST_TEST(f.exec("print(2)").stdout_data == "2\n");
}

BOOST_AUTO_TEST_CASE(bad_requests_name_what_is_wrong) {
  SKIP_WITHOUT_WORKSPACES();
  http_limits limits;
  limits.upload_bytes = 6u << 20;
  files_api_fixture f(limits);
  auto unknown = f.req("GET", "/v1/sessions/s-0000000000000000/files/x");
  BOOST_TEST(unknown.status == 404);
  BOOST_TEST(unknown.error_code() == "no_such_session");
  auto param = f.req("GET", f.files("/x?recursive"));
  BOOST_TEST(param.status == 400);
  BOOST_TEST(param.error_code() == "invalid_request");
  auto mode = f.req("PUT", f.files("/x?mode=999"), "x");
  BOOST_TEST(mode.status == 400);
  auto post = f.req("POST", f.files("/x"), "x");
  BOOST_TEST(post.status == 405);
  auto escape = f.req("GET", f.files("/%zz"));
  BOOST_TEST(escape.status == 400);
  // Refused from the Content-Length, before the body is sent (413 closes
  // the connection: a fresh one each).
  {
    http_client c(f.socket_path);
    c.send_raw("PUT " + f.files("/big") + " HTTP/1.1\r\nHost: localhost\r\nContent-Length: " +
               std::to_string((6u << 20) + 1) + "\r\n\r\n");
    auto big = c.read();
    BOOST_TEST(big.status == 413);
    BOOST_TEST(big.error_code() == "body_too_large");
    BOOST_TEST(big.error_message().find(std::to_string(6u << 20)) != std::string::npos);
  }
  {
    // The JSON routes keep their own limit.
    http_client c(f.socket_path);
    c.send_raw("POST /v1/exec HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
               "Content-Length: " + std::to_string((4u << 20) + 1) + "\r\n\r\n");
    auto json_big = c.read();
    BOOST_TEST(json_big.status == 413);
  }
  auto dir_over = f.req("PUT", f.files(""), "x");
  BOOST_TEST(dir_over.status == 409);
  BOOST_TEST(dir_over.error_code() == "is_a_directory");
}

BOOST_AUTO_TEST_CASE(a_session_without_a_workspace_has_no_files) {
  files_api_fixture f({}, false);
  auto r = f.req("GET", f.files("/"));
  BOOST_TEST(r.status == 409);
  BOOST_TEST(r.error_code() == "no_workspace");
}

BOOST_AUTO_TEST_CASE(query_and_paths_are_parsed_strictly) {
  auto ok = parse_files_request("PUT", "s", "/a%2Fb", "parents=true&mode=0755");
  BOOST_REQUIRE(std::holds_alternative<files_http_request>(ok));
  auto& r = std::get<files_http_request>(ok);
  BOOST_TEST(r.request.path == "a/b");
  BOOST_TEST(r.request.parents);
  BOOST_TEST(r.request.mode == 0755u);
  BOOST_TEST(files_error_status("no_space") == 507u);
  BOOST_TEST(files_error_status("escapes_workspace") == 403u);
  BOOST_TEST(std::holds_alternative<http_response>(parse_files_request("PUT", "s", "/a", "mkdir&mode=1")));
  BOOST_TEST(std::holds_alternative<http_response>(parse_files_request("GET", "s", "/a%", "")));
}

BOOST_AUTO_TEST_SUITE_END()
