// A request's files (exec_request::files_in, files_out; the SETUP frame's
// files block and the FILE frames of docs/wire.md): written before the code
// runs, read back after it ended, in both ways a worker runs requests, and
// gone before the next request on the same worker. What the code leaves at
// a path (a symlink, a FIFO, a huge sparse file, a /proc file) is not
// followed, not waited for, not read.

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <string>

#include "actors/pool/exec_files.hpp"
#include "actors/pool/exec_setup.hpp"
#include "support/actor_system_fixture.hpp"

using namespace castellan;

namespace {

const exec_mode both_modes[] = {exec_mode::shared, exec_mode::isolated};

const char* name_of(exec_mode m) {
  return m == exec_mode::shared ? "shared" : "isolated";
}

struct file_pools : test::actor_system_fixture {
  ~file_pools() {
    for (auto& p : pools)
      caf::anon_send(p, shutdown_atom::value);
  }

  /// One worker, so that consecutive requests meet the same process.
  pool_actor one_worker(exec_mode mode) {
    auto pc = test_pool(1);
    pc.mode = mode;
    auto pool = spawn_pool(sys, std::move(pc));
    BOOST_REQUIRE_MESSAGE(pool, (pool ? "" : pool.error().describe()));
    pools.push_back(*pool);
    return *pool;
  }

  /// The error a request is refused with before it runs ("" if none).
  std::string refusal(const pool_actor& pool, exec_request req) {
    std::string out;
    self->request(pool, std::chrono::seconds(30), exec_atom::value, std::move(req))
      .receive([&](exec_result& r) { out = "ran: " + r.detail; },
               [&](caf::error& err) { out = sys.render(err); });
    return out;
  }

  std::vector<pool_actor> pools;
};

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::string every_byte() {
  std::string s;
  for (int i = 0; i < 200 * 1024; ++i)
    s.push_back(static_cast<char>((i * 7 + i / 256) & 0xFF));
  return s;
}

exec_file_in file_in(std::string path, std::string content, uint32_t mode = 0644) {
  exec_file_in f;
  f.path = std::move(path);
  f.content = std::move(content);
  f.mode = mode;
  return f;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(exec_files_tests, file_pools)

BOOST_AUTO_TEST_CASE(files_in_reach_the_code_and_files_out_come_back) {
  const std::string binary = every_byte();
  for (const auto mode : both_modes) {
    BOOST_TEST_CONTEXT(name_of(mode)) {
      auto pool = one_worker(mode);
      exec_request req;
      // Relative paths without a cwd: the exec runs in /tmp, where they are.
      req.code = "import os, stat\n"
                 "print(os.getcwd())\n"
                 "data = open('in/data.bin', 'rb').read()\n"
                 "print(len(data), oct(stat.S_IMODE(os.stat('in/data.bin').st_mode)))\n"
                 "print(open('/tmp/note.txt').read())\n"
                 "open('out.bin', 'wb').write(data[::-1])\n"
                 "open('out.txt', 'w').write('made by the code')\n"
                 "os.mkdir('adir')\n";
      req.files_in = {file_in("in/data.bin", binary, 0600), file_in("/tmp/note.txt", "hello")};
      req.files_out = {"out.txt", "/tmp/out.bin", "absent.txt", "adir", "in/data.bin"};
      auto r = exec(pool, req);
      BOOST_TEST((r.error == error_class::ok), r.stderr_data << r.detail);
      BOOST_TEST(r.stdout_data == "/tmp\n204800 0o600\nhello\n", r.stdout_data << r.stderr_data);
      BOOST_REQUIRE(r.files.size() == 5u);
      BOOST_TEST(r.files[0].path == "out.txt");
      BOOST_TEST(r.files[0].error == "");
      BOOST_TEST(r.files[0].content == "made by the code");
      BOOST_TEST(r.files[0].size == 16u);
      BOOST_TEST(r.files[1].path == "/tmp/out.bin");
      BOOST_TEST(r.files[1].error == "", r.files[1].message);
      BOOST_TEST((r.files[1].content == std::string(binary.rbegin(), binary.rend())));
      BOOST_TEST(r.files[2].error == "missing");
      BOOST_TEST(r.files[3].error == "not_regular");
      BOOST_TEST(r.files[4].error == "");
      BOOST_TEST((r.files[4].content == binary));

      // A command too, in a cwd of its own.
      exec_request cmd;
      cmd.argv = {"/bin/sh", "-c", "pwd; cat a.txt; echo made > b.txt"};
      cmd.cwd = "/tmp/work";
      cmd.files_in = {file_in("/tmp/work/a.txt", "from the client\n")};
      cmd.files_out = {"b.txt"};
      auto c = exec(pool, cmd);
      BOOST_TEST(c.exit_code == 0, c.stderr_data);
      BOOST_TEST(c.stdout_data == "/tmp/work\nfrom the client\n", c.stdout_data << c.stderr_data);
      BOOST_REQUIRE(c.files.size() == 1u);
      BOOST_TEST(c.files[0].content == "made\n");
    }
  }
}

BOOST_AUTO_TEST_CASE(the_next_request_finds_none_of_the_files) {
  for (const auto mode : both_modes) {
    BOOST_TEST_CONTEXT(name_of(mode)) {
      auto pool = one_worker(mode);
      exec_request req;
      req.code = "print(open('/tmp/secret.txt').read())\n";
      req.files_in = {file_in("/tmp/secret.txt", "secret"), file_in("/tmp/d/deep.txt", "deep")};
      auto r = exec(pool, req);
      BOOST_TEST(r.stdout_data == "secret\n", r.stderr_data);
      exec_request cmd;
      cmd.argv = {"/bin/true"};
      cmd.files_in = {file_in("/tmp/cmd.txt", "secret")};
      BOOST_TEST(exec(pool, cmd).exit_code == 0);
      auto after = exec_code(pool, "import os\n"
                                   "print([os.path.exists(p) for p in ('/tmp/secret.txt',\n"
                                   "       '/tmp/d/deep.txt', '/tmp/cmd.txt')])\n"
                                   "print([n for n in os.listdir('/tmp') if 'castellan' in n])\n");
      BOOST_TEST(after.worker_id == r.worker_id);
      BOOST_TEST(after.stdout_data == "[False, False, False]\n[]\n", after.stdout_data);
    }
  }
}

BOOST_AUTO_TEST_CASE(what_the_code_leaves_at_a_path_is_not_followed_nor_waited_for) {
  for (const auto mode : both_modes) {
    BOOST_TEST_CONTEXT(name_of(mode)) {
      auto pool = one_worker(mode);
      exec_request req;
      req.code = "import os\n"
                 "os.symlink('/etc/passwd', 'link')\n"
                 "os.mkfifo('fifo')\n"
                 "os.mkdir('real')\n"
                 "open('real/f', 'w').write('x')\n"
                 "os.symlink('real', 'dirlink')\n"
                 "with open('sparse', 'wb') as f:\n"
                 "    f.truncate(1 << 40)\n"
                 "open('big', 'wb').write(b'y' * (8 * 1024 * 1024 + 1))\n";
      req.files_out = {"link", "fifo", "dirlink/f", "sparse", "big", "real/f"};
      req.timeout_ms = 20000;
      auto r = exec(pool, req);
      BOOST_TEST((r.error == error_class::ok), r.stderr_data << r.detail);
      BOOST_REQUIRE(r.files.size() == 6u);
      BOOST_TEST(r.files[0].error == "not_regular");
      BOOST_TEST(r.files[1].error == "not_regular");
      BOOST_TEST(r.files[2].error == "not_regular");
      BOOST_TEST(r.files[3].error == "too_large");
      BOOST_TEST(r.files[3].size == uint64_t{1} << 40);
      BOOST_TEST(contains(r.files[3].message, "at most 8388608"), r.files[3].message);
      BOOST_TEST(r.files[4].error == "too_large");
      BOOST_TEST(r.files[4].size == 8u * 1024 * 1024 + 1);
      BOOST_TEST(r.files[5].content == "x");
      // /proc through a working directory there: not read by the process
      // that serves the exec.
      exec_request proc;
      proc.code = "print('ran')";
      proc.cwd = "/proc";
      proc.files_out = {"self/environ", "self/status", "2/status"};
      auto p = exec(pool, proc);
      BOOST_TEST(p.stdout_data == "ran\n", p.stderr_data);
      BOOST_REQUIRE(p.files.size() == 3u);
      BOOST_TEST(p.files[0].error == "not_regular"); // /proc/self is a symlink
      BOOST_TEST(p.files[1].error == "not_regular");
      // The harness, PID 2: in shared mode the code's own process, whose
      // /proc entry is there and a regular file, refused for being on
      // procfs; in isolated mode hidden from the zygote, or not its own.
      if (mode == exec_mode::shared && !test_pool().warm_start)
        BOOST_TEST(p.files[2].error == "not_regular");
      else
        BOOST_TEST((p.files[2].error == "missing" || p.files[2].error == "unreadable" ||
                    p.files[2].error == "not_regular"),
                   p.files[2].error);
    }
  }
}

BOOST_AUTO_TEST_CASE(the_files_together_stop_at_their_total) {
  for (const auto mode : both_modes) {
    BOOST_TEST_CONTEXT(name_of(mode)) {
      auto pool = one_worker(mode);
      exec_request req;
      // Five sparse files of 7 MiB: 35 MiB, over the 32 MiB all may bring.
      req.code = "for i in range(5):\n"
                 "    with open(f'f{i}', 'wb') as f:\n"
                 "        f.truncate(7 << 20)\n";
      for (int i = 0; i < 5; ++i)
        req.files_out.push_back("f" + std::to_string(i));
      auto r = exec(pool, req);
      BOOST_REQUIRE(r.files.size() == 5u);
      for (std::size_t i = 0; i < 4; ++i) {
        BOOST_TEST(r.files[i].error == "", r.files[i].message);
        BOOST_TEST(r.files[i].content.size() == 7u << 20);
      }
      BOOST_TEST(r.files[4].error == "too_large");
      BOOST_TEST(contains(r.files[4].message, "33554432"), r.files[4].message);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_symlink_planted_by_an_earlier_exec_redirects_nothing) {
  // Shared mode: one process for every request, and /tmp is not emptied
  // between them. What one exec planted does not make the next one's files
  // land elsewhere.
  auto pool = one_worker(exec_mode::shared);
  auto plant = exec_code(pool, "import os\n"
                               "os.mkdir('/tmp/victim')\n"
                               "open('/tmp/victim/f', 'w').write('untouched')\n"
                               "os.symlink('/tmp/victim', '/tmp/dirlink')\n"
                               "os.symlink('/tmp/victim/f', '/tmp/filelink')\n"
                               "os.link('/tmp/victim/f', '/tmp/hardlink')\n");
  BOOST_TEST((plant.error == error_class::ok), plant.stderr_data);
  exec_request through_dir;
  through_dir.code = "print('ran')";
  through_dir.files_in = {file_in("/tmp/dirlink/f", "overwritten")};
  auto r1 = exec(pool, through_dir);
  BOOST_TEST(r1.exit_code == 126);
  BOOST_TEST(r1.stdout_data.empty());
  BOOST_TEST(contains(r1.stderr_data, "cannot write the file '/tmp/dirlink/f': a symlink is on "
                                      "its path"),
             r1.stderr_data);
  exec_request over_links;
  over_links.code = "import os\n"
                    "print(os.path.islink('/tmp/filelink'), open('/tmp/filelink').read())\n"
                    "print(open('/tmp/hardlink').read())\n";
  over_links.files_in = {file_in("/tmp/filelink", "new"), file_in("/tmp/hardlink", "new2")};
  auto r2 = exec(pool, over_links);
  BOOST_TEST(r2.stdout_data == "False new\nnew2\n", r2.stdout_data << r2.stderr_data);
  auto check = exec_code(pool, "print(open('/tmp/victim/f').read())\n");
  BOOST_TEST(check.stdout_data == "untouched\n", check.stdout_data << check.stderr_data);
}

BOOST_AUTO_TEST_CASE(paths_and_sizes_are_checked_before_the_request_runs) {
  auto pool = one_worker(exec_mode::shared);
  auto with_in = [](std::string path, std::string content = "x", uint32_t mode = 0644) {
    exec_request req;
    req.code = "print(1)";
    req.files_in = {file_in(std::move(path), std::move(content), mode)};
    return req;
  };
  BOOST_TEST(contains(refusal(pool, with_in("../etc/x")), "files_in[0].path: '../etc/x' has a "
                                                          "'..' component"));
  BOOST_TEST(contains(refusal(pool, with_in("/tmp/a/../../etc/x")), "'..' component"));
  BOOST_TEST(contains(refusal(pool, with_in("/etc/passwd")),
                      "files_in[0].path: '/etc/passwd' is not below /tmp or the working "
                      "directory '/tmp'"));
  BOOST_TEST(contains(refusal(pool, with_in("/tmp")), "is not below /tmp"));
  BOOST_TEST(contains(refusal(pool, with_in("")), "files_in[0].path: the path is empty"));
  BOOST_TEST(contains(refusal(pool, with_in("a", "x", 04755)),
                      "files_in[0].mode: 2541 is not permission bits"));
  BOOST_TEST(contains(refusal(pool, with_in("a", std::string((8u << 20) + 1, 'x'))),
                      "files_in[0].content: 8388609 bytes; a file may have at most 8388608"));
  auto twice = with_in("a");
  twice.files_in.push_back(file_in("/tmp/a", "y"));
  BOOST_TEST(contains(refusal(pool, twice), "files_in[1].path: '/tmp/a' is written twice"));
  auto nested = with_in("a");
  nested.files_in.push_back(file_in("a/b", "y"));
  BOOST_TEST(contains(refusal(pool, nested), "cannot both be files"));
  exec_request out;
  out.code = "print(1)";
  out.cwd = "/usr";
  out.files_out = {"lib/os-release", "/etc/shadow"};
  BOOST_TEST(contains(refusal(pool, out), "files_out[1]: '/etc/shadow' is not below /tmp or the "
                                          "working directory '/usr'"));
  exec_request many;
  many.code = "print(1)";
  many.files_out.assign(max_files + 1, "f");
  BOOST_TEST(contains(refusal(pool, many), "files_out: 65 files; at most 64"));
  // A request with a policy keeps its files in /tmp.
  exec_request narrowed;
  narrowed.code = "print(1)";
  narrowed.cwd = "/usr";
  narrowed.policy = "{}";
  narrowed.files_out = {"lib/os-release"};
  BOOST_TEST(contains(refusal(pool, narrowed), "not below /tmp (a request with a policy keeps "
                                               "its files there)"));
  // Files count against the ring with the rest of the request.
  exec_request ring;
  ring.code = "print(1)";
  ring.files_in = {file_in("a", std::string(600 * 1024, 'x')), file_in("b", std::string(600 * 1024, 'y'))};
  auto r = exec(pool, ring);
  BOOST_TEST((r.error == error_class::limit_exceeded));
  BOOST_TEST(contains(r.detail, "the ring holds 1048576"), r.detail);
  // A refused request's files_out say so.
  BOOST_REQUIRE(r.files.empty());
  auto ok = exec_code(pool, "print('fine')");
  BOOST_TEST(ok.stdout_data == "fine\n");
}

BOOST_AUTO_TEST_CASE(files_out_of_an_exec_that_did_not_get_there_say_so) {
  for (const auto mode : both_modes) {
    BOOST_TEST_CONTEXT(name_of(mode)) {
      auto pool = one_worker(mode);
      exec_request req;
      req.code = "import time\ntime.sleep(30)\n";
      req.timeout_ms = 300;
      req.files_out = {"f"};
      auto r = exec(pool, req);
      BOOST_TEST((r.error == error_class::timeout));
      BOOST_REQUIRE(r.files.size() == 1u);
      BOOST_TEST(r.files[0].error == "not_collected");
    }
  }
}

BOOST_AUTO_TEST_CASE(a_file_cut_short_by_the_end_of_its_exec_is_not_passed_off_as_whole) {
  // The exec is answered while a file's FILE frames are still coming (here
  // a protocol violation after its first piece; a deadline or a cancel
  // does the same): the piece that came was the file's whole content in
  // the result, with no error, and a size its bytes did not have. In
  // shared mode the code can write on the wire itself.
  auto pool = one_worker(exec_mode::shared);
  exec_request req;
  req.code = "import gc, struct, sys\n"
             "W = sys.modules['castellan_wire']\n"
             "wire = [o for o in gc.get_objects() if isinstance(o, W.Wire)][0]\n"
             "rid = [o for o in gc.get_objects() if hasattr(type(o), 'send_result')\n"
             "       and isinstance(getattr(o, 'request_id', None), int)][0].request_id\n"
             "H = struct.Struct('<IBQ')\n"
             "wire.send(W.FILE, rid, H.pack(0, 0, 10) + b'abc')\n"
             "wire.send(W.FILE, rid, H.pack(7, 1, 0))\n"
             "import time\n"
             "time.sleep(30)\n";
  req.timeout_ms = 20000;
  req.files_out = {"out"};
  auto r = exec(pool, req);
  BOOST_TEST((r.error == error_class::worker_lost), r.detail);
  BOOST_TEST(contains(r.detail, "the request asked for 1 files"), r.detail);
  BOOST_REQUIRE(r.files.size() == 1u);
  BOOST_TEST(r.files[0].error == "not_collected");
  BOOST_TEST(r.files[0].content.empty());
  BOOST_TEST(r.files[0].size == 0u);
  // The collector itself, for the other ways an exec ends early.
  std::vector<exec_file_out> files;
  file_collector::prepare({"a", "b"}, files);
  file_collector c;
  BOOST_REQUIRE(bool(c.take(encode_file_frame(0, file_status::content, 2, "xy"), files)));
  BOOST_REQUIRE(bool(c.take(encode_file_frame(1, file_status::content, 4, "z"), files)));
  c.abandon(files);
  BOOST_TEST(files[0].content == "xy"); // whole: kept
  BOOST_TEST(files[0].error == "");
  BOOST_TEST(files[1].error == "not_collected");
  BOOST_TEST(files[1].content.empty());
}

BOOST_AUTO_TEST_CASE(the_files_block_is_the_documented_layout) {
  exec_request req;
  req.files_in = {file_in("a", "xy", 0600)};
  req.files_out = {"/tmp/b"};
  const std::string p = encode_setup(req);
  auto u32 = [](uint32_t v) {
    std::string s;
    for (int i = 0; i < 4; ++i)
      s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
    return s;
  };
  const std::string block = u32(1) + u32(1) + u32(6) + u32(0600) + u32(2) + "/tmp/a" + "xy" +
                            u32(6) + "/tmp/b";
  const std::string want = u32(4) + u32(0) + u32(0) + u32(setup_files) +
                           u32(static_cast<uint32_t>(block.size())) + "/tmp" + block;
  BOOST_TEST(p == want);
  BOOST_TEST(setup_bytes(req) == p.size());
}

BOOST_AUTO_TEST_CASE(hostile_file_frames_are_protocol_violations) {
  std::vector<exec_file_out> files;
  file_collector::prepare({"a", "b"}, files);
  BOOST_TEST(files[1].error == "not_collected");
  auto frame = [](uint32_t i, file_status s, uint64_t size, std::string data = {}) {
    return encode_file_frame(i, s, size, data);
  };
  auto fails = [&](std::vector<std::string> frames, const std::string& why) {
    std::vector<exec_file_out> f;
    file_collector::prepare({"a", "b"}, f);
    file_collector c;
    for (const auto& fr : frames) {
      auto ok = c.take(fr, f);
      if (!ok)
        return contains(ok.error().message, why) ? std::string() : ok.error().message;
    }
    auto done = c.finish();
    if (!done)
      return contains(done.error().message, why) ? std::string() : done.error().message;
    return std::string("accepted");
  };
  BOOST_TEST(fails({"short"}, "shorter than its header") == "");
  BOOST_TEST(fails({frame(2, file_status::missing, 0)}, "asked for 2 files") == "");
  BOOST_TEST(fails({frame(1, file_status::missing, 0), frame(0, file_status::missing, 0)},
                   "FILE 0 after file 1") == "");
  BOOST_TEST(fails({frame(0, file_status::missing, 0, "x")}, "data with status 1") == "");
  BOOST_TEST(fails({frame(0, file_status::content, 2, "xyz")}, "3 bytes of a file of 2") == "");
  BOOST_TEST(fails({frame(0, file_status::content, max_file_bytes + 1)}, "over the limit") == "");
  BOOST_TEST(fails({frame(0, file_status::content, 4, "xy")}, "2 bytes to come") == "");
  BOOST_TEST(fails({frame(0, file_status::content, 4, "xy"), frame(1, file_status::missing, 0)},
                   "while file 0 has 2 bytes to come") == "");
  BOOST_TEST(fails({frame(0, file_status::content, 4, "xy"),
                    frame(0, file_status::content, 4, "xyz")},
                   "3 bytes where 2 remain") == "");
  BOOST_TEST(fails({frame(0, static_cast<file_status>(9), 0)}, "unknown status 9") == "");
  BOOST_TEST(fails({frame(0, file_status::unreadable, 0)}, "errno 0 out of range") == "");
  BOOST_TEST(fails({frame(0, file_status::content, max_file_bytes),
                    frame(1, file_status::content, max_file_bytes)},
                   "") != "accepted"); // announced, never sent: still open at RESULT
  // Well-formed: in order, in pieces.
  file_collector c;
  BOOST_TEST(bool(c.take(frame(0, file_status::content, 5, "ab"), files)));
  BOOST_TEST(bool(c.take(frame(0, file_status::content, 5, "cde"), files)));
  BOOST_TEST(bool(c.take(frame(1, file_status::unreadable, 13), files)));
  BOOST_TEST(bool(c.finish()));
  BOOST_TEST(files[0].content == "abcde");
  BOOST_TEST(files[0].error == "");
  BOOST_TEST(files[1].error == "unreadable");
  BOOST_TEST(files[1].message == "cannot read it: Permission denied");
}

BOOST_AUTO_TEST_SUITE_END()
