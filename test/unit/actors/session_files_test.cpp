#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>

#include "actors/errors.hpp"
#include "actors/session/session_files.hpp"
#include "support/actor_system_fixture.hpp"
#include "support/skip.hpp"
#include "support/temp_dir.hpp"
#include "support/workspace_support.hpp"

using namespace castellan;
using namespace std::chrono_literals;

namespace {

/// A supervisor with a workspace store in a temporary directory, and a
/// session bound to a workspace of it ("files", `quota` bytes).
struct files_fixture : test::actor_system_fixture {
  test::temp_dir tmp;
  test::mount_sweeper sweeper{tmp.path.string()};
  supervisor_actor sup;
  session_info session;
  session_ref ref;

  explicit files_fixture(bool with_workspace = true, uint64_t quota = 64u << 20) {
    supervisor_config sc;
    auto pc = test_pool(1);
    pc.mode = exec_mode::shared;
    sc.pools = {pc};
    workspace_config ws;
    ws.store.directory = tmp.file("workspaces");
    sc.workspaces = ws;
    auto s = spawn_supervisor(sys, sc);
    BOOST_REQUIRE_MESSAGE(s, (s ? "" : s.error().describe()));
    sup = *s;
    session_options opts;
    if (with_workspace) {
      self->request(sup, 60s, workspace_create_atom::value, std::string("files"), quota)
        .receive([&](workspace_info&) {}, [&](caf::error& err) { BOOST_FAIL(describe(err, sys)); });
      opts.workspace = "files";
    }
    self->request(sup, 60s, session_create_atom::value, opts)
      .receive([&](session_info& info) { session = std::move(info); },
               [&](caf::error& err) { BOOST_FAIL(describe(err, sys)); });
    ref = session_ref{session.id, ""};
  }
  ~files_fixture() {
    caf::anon_send(sup, shutdown_atom::value);
    // The store unmounts as the supervisor goes; the sweeper makes sure.
    self->wait_for(sup);
  }

  /// Where the workspace is mounted on the host.
  std::string host(const std::string& rel) const {
    return tmp.file("workspaces/mounts/files/" + rel);
  }

  caf::expected<files_reply> files(files_request req) {
    caf::expected<files_reply> out{caf::error{}};
    self->request(sup, 60s, files_atom::value, ref, std::move(req))
      .receive([&](files_reply& r) { out = std::move(r); },
               [&](caf::error& err) { out = std::move(err); });
    return out;
  }
  files_reply ok(files_request req) {
    auto r = files(std::move(req));
    BOOST_REQUIRE_MESSAGE(r, (r ? "" : describe(r.error(), sys)));
    BOOST_REQUIRE_MESSAGE(r->error.empty(), r->error + ": " + r->message);
    return *r;
  }
  files_reply upload(const std::string& path, std::string data, bool parents = false) {
    files_request req;
    req.op = files_op::upload;
    req.path = path;
    req.data = std::move(data);
    req.parents = parents;
    return ok(std::move(req));
  }
  /// A download through the supervisor and its transfer actor: the bytes,
  /// or the error of its head or of a chunk.
  std::pair<std::string, std::string> download(const std::string& path) {
    download_ticket t;
    std::string err;
    self->request(sup, 60s, files_download_atom::value, ref, path)
      .receive([&](download_ticket& got) { t = std::move(got); },
               [&](caf::error& e) { err = describe(e, sys); });
    if (!err.empty())
      return {"", err};
    if (!t.head.error.empty())
      return {"", t.head.error};
    auto transfer = caf::actor_cast<files_job_actor>(t.transfer);
    std::string out;
    for (;;) {
      std::string chunk;
      bool failed = false;
      self->request(transfer, 60s, files_read_atom::value)
        .receive([&](std::string& c) { chunk = std::move(c); },
                 [&](caf::error& e) {
                   err = describe(e, sys);
                   failed = true;
                 });
      if (failed)
        return {out, err};
      if (chunk.empty())
        break;
      out += chunk;
    }
    BOOST_TEST(out.size() == t.head.entry.size);
    return {out, ""};
  }
  exec_result exec(const std::string& code) {
    exec_result out;
    exec_request req;
    req.code = code;
    self->request(sup, 60s, exec_atom::value, ref, std::move(req))
      .receive([&](exec_result& r) { out = std::move(r); },
               [&](caf::error& e) { BOOST_FAIL(describe(e, sys)); });
    return out;
  }
};

castellan_errc code_of(const caf::error& err) {
  BOOST_REQUIRE(err.category() == caf::detail::error_factory<castellan_errc>::category);
  return static_cast<castellan_errc>(err.code());
}

} // namespace

BOOST_AUTO_TEST_SUITE(session_files_tests)

/// Workspaces need the loop driver and ext4.
#define SKIP_WITHOUT_WORKSPACES()                                                                  \
  if (auto why = test::workspace_kernel_lacks())                                                   \
    return test::skip(*why);

BOOST_AUTO_TEST_CASE(upload_list_download_and_remove_through_the_supervisor) {
  SKIP_WITHOUT_WORKSPACES();
  files_fixture f;
  std::string bytes(3 * files_chunk_bytes + 17, '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<char>(i * 31);
  auto up = f.upload("/workspace/data/in.bin", bytes, true);
  BOOST_TEST(up.entry.size == bytes.size());
  BOOST_TEST(up.path == "/workspace/data/in.bin");
  // The code in the session sees it, and may change it: it belongs to the
  // sandbox's user.
  auto r = f.exec("import hashlib\n"
                  "b = open('/workspace/data/in.bin', 'rb').read()\n"
                  "print(len(b))\n"
                  "open('/workspace/data/in.bin', 'ab').write(b'+')\n"
                  "open('/workspace/data/out.txt', 'w').write('from the sandbox')\n");
  BOOST_TEST(r.exit_code == 0, r.stderr_data);
  BOOST_TEST(r.stdout_data == std::to_string(bytes.size()) + "\n");
  auto [got, err] = f.download("data/in.bin");
  BOOST_TEST(err.empty(), err);
  BOOST_TEST((got == bytes + "+"));
  files_request list;
  list.op = files_op::list;
  list.path = "data";
  auto l = f.ok(list);
  BOOST_REQUIRE_EQUAL(l.entries.size(), 2u);
  BOOST_TEST(l.entries[0].name == "in.bin");
  BOOST_TEST(l.entries[1].name == "out.txt");
  BOOST_TEST(l.entries[1].type == "file");
  files_request rm;
  rm.op = files_op::remove;
  rm.path = "data";
  auto refused = f.files(rm);
  BOOST_REQUIRE(refused);
  BOOST_TEST(refused->error == "not_empty");
  rm.recursive = true;
  f.ok(rm);
  struct stat st{};
  BOOST_TEST(::stat(f.host("data").c_str(), &st) != 0);
}

BOOST_AUTO_TEST_CASE(files_work_while_an_exec_runs) {
  SKIP_WITHOUT_WORKSPACES();
  files_fixture f;
  // The exec waits for a file only the files API will bring: it ends
  // only because the upload was served while it ran.
  exec_request req;
  req.code = "import os, time\n"
             "for _ in range(3000):\n"
             "    if os.path.exists('/workspace/go'):\n"
             "        break\n"
             "    time.sleep(0.01)\n"
             "print(open('/workspace/go').read())\n";
  bool answered = false;
  exec_result result;
  auto handle = f.self->request(f.sup, 60s, exec_atom::value, f.ref, std::move(req));
  f.upload("go", "released by an upload");
  handle.receive([&](exec_result& r) {
                   answered = true;
                   result = std::move(r);
                 },
                 [&](caf::error& e) { BOOST_FAIL(describe(e, f.sys)); });
  BOOST_REQUIRE(answered);
  BOOST_TEST(result.stdout_data == "released by an upload\n");
}

BOOST_AUTO_TEST_CASE(what_the_sandbox_plants_is_refused_cleanly) {
  SKIP_WITHOUT_WORKSPACES();
  files_fixture f;
  auto r = f.exec("import os\n"
                  "os.symlink('/etc/shadow', '/workspace/shadow')\n"
                  "os.symlink('../../../../etc/passwd', '/workspace/passwd')\n"
                  "os.mkfifo('/workspace/fifo')\n"
                  "os.symlink('/proc/self/root', '/workspace/root')\n");
  BOOST_TEST(r.exit_code == 0, r.stderr_data);
  BOOST_TEST(f.download("shadow").second == "escapes_workspace");
  BOOST_TEST(f.download("passwd").second == "escapes_workspace");
  BOOST_TEST(f.download("root/etc/shadow").second == "escapes_workspace");
  BOOST_TEST(f.download("fifo").second == "not_regular");
  BOOST_TEST(f.download("../etc/passwd").second == "invalid_path");
  files_request st;
  st.op = files_op::stat;
  st.path = "shadow";
  auto e = f.ok(st);
  BOOST_TEST(e.entry.type == "symlink");
  BOOST_TEST(e.entry.link_target == "/etc/shadow");
  // An upload over the planted link replaces the link.
  f.upload("shadow", "not the host's");
  auto [got, err] = f.download("shadow");
  BOOST_TEST(got == "not the host's");
  // The session is still there and answers.
  BOOST_TEST(f.exec("print(1)").stdout_data == "1\n");
}

BOOST_AUTO_TEST_CASE(a_session_without_a_workspace_refuses_files) {
  files_fixture f(false);
  files_request st;
  st.op = files_op::stat;
  auto r = f.files(st);
  BOOST_REQUIRE(!r);
  BOOST_TEST((code_of(r.error()) == castellan_errc::invalid_request));
  BOOST_TEST(describe(r.error(), f.sys).find("no workspace") != std::string::npos);
  f.ref.id = "s-0000000000000000";
  auto none = f.files(st);
  BOOST_REQUIRE(!none);
  BOOST_TEST((code_of(none.error()) == castellan_errc::no_such_session));
}

BOOST_AUTO_TEST_CASE(a_full_workspace_answers_no_space_and_keeps_the_file) {
  SKIP_WITHOUT_WORKSPACES();
  files_fixture f(true, 8u << 20);
  const std::string old = "the old content";
  f.upload("keep.txt", old);
  files_request big;
  big.op = files_op::upload;
  big.path = "keep.txt";
  big.data.assign(16u << 20, 'z');
  auto r = f.files(std::move(big));
  BOOST_REQUIRE(r);
  BOOST_TEST(r->error == "no_space");
  BOOST_TEST(r->message.find("/workspace/keep.txt") != std::string::npos);
  BOOST_TEST(f.download("keep.txt").first == old);
  files_request list;
  list.op = files_op::list;
  for (const auto& e : f.ok(list).entries)
    BOOST_TEST(e.name.rfind(".castellan-upload-", 0) != 0u, e.name);
  // The code in the session still writes there.
  auto e = f.exec("open('/workspace/after.txt', 'w').write('ok')");
  BOOST_TEST(e.exit_code == 0, e.stderr_data);
}

BOOST_AUTO_TEST_SUITE_END()
