#include <boost/test/unit_test.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ipc/unique_fd.hpp"
#include "platform/linux/file_io.hpp"
#include "platform/linux/workspace_files.hpp"
#include "platform/linux/workspace_path.hpp"
#include "platform/linux/workspace_transfer.hpp"
#include "platform/linux/workspace_volume.hpp"
#include "support/skip.hpp"
#include "support/temp_dir.hpp"
#include "support/workspace_support.hpp"

using namespace castellan;
using namespace castellan::platform;

namespace {

/// A workspace root (a plain directory of a temporary one, beside an
/// "outside" directory that must never be touched) and its fd.
struct ws_fixture {
  test::temp_dir tmp;
  unique_fd root;
  volume_owner owner{12345, 23456};

  ws_fixture() {
    BOOST_REQUIRE(::mkdir(tmp.file("ws").c_str(), 0755) == 0);
    BOOST_REQUIRE(::mkdir(tmp.file("outside").c_str(), 0755) == 0);
    write_host("outside/secret", "top secret");
    root.reset(::open(tmp.file("ws").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    BOOST_REQUIRE(root);
  }
  std::string ws(const std::string& rel) const { return tmp.file("ws/" + rel); }
  void write_host(const std::string& rel, const std::string& content) const {
    std::ofstream f(tmp.file(rel), std::ios::binary);
    f << content;
  }
  std::string read_host(const std::string& rel) const {
    std::ifstream f(tmp.file(rel), std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  std::vector<std::string> names(const std::string& rel_dir) const {
    std::vector<std::string> out;
    for (auto& e : std::filesystem::directory_iterator(tmp.file(rel_dir)))
      out.push_back(e.path().filename().string());
    return out;
  }
};

workspace_path wp(const std::string& text) {
  auto p = parse_workspace_path(text);
  BOOST_REQUIRE_MESSAGE(p.has_value(), text);
  return *p;
}

outcome<workspace_entry> upload(int root, const std::string& path, const std::string& bytes,
                                upload_options opts = {}) {
  auto p = parse_workspace_path(path);
  if (!p)
    return p.error();
  auto up = workspace_upload::begin(root, *p, opts);
  if (!up)
    return up.error();
  for (std::size_t off = 0; off < bytes.size(); off += 1 << 20)
    if (auto w = up->write(std::string_view(bytes).substr(off, 1 << 20)); !w)
      return w.error();
  return up->commit();
}

outcome<std::string> download(int root, const std::string& path) {
  auto p = parse_workspace_path(path);
  if (!p)
    return p.error();
  auto d = workspace_download::open(root, *p);
  if (!d)
    return d.error();
  std::string out;
  while (!d->done()) {
    auto chunk = d->read(1 << 20);
    if (!chunk)
      return chunk.error();
    out += *chunk;
  }
  return out;
}

bool no_temp_files(const std::vector<std::string>& names) {
  for (const auto& n : names)
    if (n.rfind(".castellan-upload-", 0) == 0)
      return false;
  return true;
}

std::string all_bytes(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i)
    s[i] = static_cast<char>((i * 7 + i / 256) & 0xff);
  return s;
}

} // namespace

BOOST_AUTO_TEST_SUITE(workspace_files_tests)

BOOST_AUTO_TEST_CASE(the_kernel_has_openat2_beneath) {
  BOOST_TEST(check_openat2().has_value());
}

BOOST_AUTO_TEST_CASE(paths_are_relative_or_under_slash_workspace_and_never_climb) {
  BOOST_TEST(wp("/workspace/a//./b/").relative() == "a/b");
  BOOST_TEST(wp("a/b").display() == "/workspace/a/b");
  BOOST_TEST(wp("").is_root());
  BOOST_TEST(wp("/workspace").is_root());
  BOOST_TEST(wp(".").is_root());
  for (const char* bad : {"../../etc/passwd", "a/../../b", "/etc/passwd", "/workspacex/a",
                          "/tmp/x", "a/.."}) {
    auto p = parse_workspace_path(bad);
    BOOST_REQUIRE_MESSAGE(!p.has_value(), bad);
    BOOST_TEST(p.error().code == EINVAL);
    BOOST_TEST(files_error_code(p.error()) == "invalid_path");
    BOOST_TEST(p.error().message.find(bad) != std::string::npos);
  }
  BOOST_TEST(!parse_workspace_path(std::string("a\0b", 3)));
  BOOST_TEST(!parse_workspace_path(std::string(300, 'x')));
}

BOOST_AUTO_TEST_CASE(a_binary_file_round_trips_empty_small_and_large) {
  ws_fixture f;
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{4097},
                        std::size_t{24} << 20}) {
    const auto bytes = all_bytes(n);
    auto e = upload(f.root.get(), "/workspace/bin.dat", bytes, {f.owner, 0640});
    BOOST_REQUIRE_MESSAGE(e.has_value(), (e ? std::string() : e.error().describe()));
    BOOST_TEST(e->size == n);
    auto back = download(f.root.get(), "bin.dat");
    BOOST_REQUIRE(back);
    BOOST_TEST((*back == bytes));
  }
  struct stat st{};
  BOOST_REQUIRE(::stat(f.ws("bin.dat").c_str(), &st) == 0);
  BOOST_TEST(st.st_uid == 12345u);
  BOOST_TEST(st.st_gid == 23456u);
  BOOST_TEST((st.st_mode & 07777) == 0640u);
  BOOST_TEST(no_temp_files(f.names("ws")));
}

BOOST_AUTO_TEST_CASE(symlinks_out_of_the_workspace_are_refused_both_ways) {
  ws_fixture f;
  BOOST_REQUIRE(::symlink("/etc/passwd", f.ws("abs").c_str()) == 0);
  BOOST_REQUIRE(::symlink("../outside/secret", f.ws("rel").c_str()) == 0);
  BOOST_REQUIRE(::symlink("../../../../../../../etc/shadow", f.ws("deep").c_str()) == 0);
  BOOST_REQUIRE(::symlink(f.tmp.file("outside").c_str(), f.ws("pdir").c_str()) == 0);
  BOOST_REQUIRE(::symlink("../outside", f.ws("reldir").c_str()) == 0);
  for (const char* p : {"abs", "rel", "deep", "pdir/secret", "reldir/secret"}) {
    auto r = download(f.root.get(), p);
    BOOST_REQUIRE_MESSAGE(!r.has_value(), p);
    BOOST_TEST(r.error().code == EXDEV);
    BOOST_TEST(files_error_code(r.error()) == "escapes_workspace");
    BOOST_TEST(r.error().message.find(p) != std::string::npos);
  }
  // Writing through a symlinked parent is refused and makes nothing there.
  for (const char* p : {"pdir/planted", "reldir/planted"}) {
    auto r = upload(f.root.get(), p, "x", {f.owner});
    BOOST_REQUIRE_MESSAGE(!r.has_value(), p);
    BOOST_TEST(r.error().code == EXDEV);
  }
  BOOST_TEST(f.names("outside") == std::vector<std::string>{"secret"});
  BOOST_TEST(!list_directory(f.root.get(), wp("pdir")));
  BOOST_TEST(!make_directory(f.root.get(), wp("pdir/new"), true, f.owner));
  BOOST_TEST(!remove_entry(f.root.get(), wp("pdir/secret"), false));
  BOOST_TEST(f.read_host("outside/secret") == "top secret");
  // Uploading over a symlink replaces the link, never writes its target.
  auto over = upload(f.root.get(), "rel", "replaced", {f.owner});
  BOOST_REQUIRE(over);
  BOOST_TEST(f.read_host("outside/secret") == "top secret");
  BOOST_TEST(f.read_host("ws/rel") == "replaced");
  // Removing a symlink removes the link only.
  BOOST_REQUIRE(remove_entry(f.root.get(), wp("pdir"), true));
  BOOST_TEST(f.read_host("outside/secret") == "top secret");
  // stat reports a symlink itself, with its target, and follows nothing.
  auto st = stat_entry(f.root.get(), wp("abs"));
  BOOST_REQUIRE(st);
  BOOST_TEST(to_string(st->type) == "symlink");
  BOOST_TEST(st->link_target == "/etc/passwd");
}

BOOST_AUTO_TEST_CASE(symlinks_that_stay_inside_are_followed) {
  ws_fixture f;
  BOOST_REQUIRE(::mkdir(f.ws("data").c_str(), 0755) == 0);
  f.write_host("ws/data/f", "inside");
  BOOST_REQUIRE(::symlink("data/f", f.ws("link").c_str()) == 0);
  BOOST_REQUIRE(::symlink("../data", f.ws("data/self").c_str()) == 0);
  auto r = download(f.root.get(), "link");
  BOOST_REQUIRE(r);
  BOOST_TEST(*r == "inside");
  auto r2 = download(f.root.get(), "data/self/f");
  BOOST_REQUIRE(r2);
  BOOST_TEST(*r2 == "inside");
}

BOOST_AUTO_TEST_CASE(magic_links_are_refused) {
  ws_fixture f;
  BOOST_REQUIRE(::symlink("/proc/self/root/etc/passwd", f.ws("m").c_str()) == 0);
  auto r = download(f.root.get(), "m");
  BOOST_REQUIRE(!r);
  BOOST_TEST(files_error_code(r.error()) == "escapes_workspace");
  // A root that holds magic links (/proc/self): reaching through one is
  // refused even though the path stays "beneath".
  unique_fd proc(::open("/proc/self", O_PATH | O_DIRECTORY | O_CLOEXEC));
  BOOST_REQUIRE(proc);
  for (const char* p : {"root/etc/passwd", "cwd", "fd/0", "exe"}) {
    auto d = workspace_download::open(proc.get(), wp(p));
    BOOST_REQUIRE_MESSAGE(!d.has_value(), p);
    BOOST_TEST_MESSAGE(d.error().describe());
    BOOST_TEST(files_error_code(d.error()) == "escapes_workspace");
  }
}

BOOST_AUTO_TEST_CASE(a_fifo_or_a_device_is_refused_without_blocking_or_opening) {
  ws_fixture f;
  BOOST_REQUIRE(::mkfifo(f.ws("pipe").c_str(), 0666) == 0);
  // A blocking open would hang here (no reader): the test would not end.
  auto r = download(f.root.get(), "pipe");
  BOOST_REQUIRE(!r);
  BOOST_TEST(r.error().code == special_file_errno);
  BOOST_TEST(files_error_code(r.error()) == "not_regular");
  BOOST_TEST(r.error().message.find("fifo") != std::string::npos);
  BOOST_TEST(!list_directory(f.root.get(), wp("pipe")));
  auto st = stat_entry(f.root.get(), wp("pipe"));
  BOOST_REQUIRE(st);
  BOOST_TEST(to_string(st->type) == "fifo");
  // A device node (made on the host, which the sandbox cannot do): refused
  // from its type, not read.
  if (::mknod(f.ws("null").c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0) {
    auto n = download(f.root.get(), "null");
    BOOST_REQUIRE(!n);
    BOOST_TEST(files_error_code(n.error()) == "not_regular");
    BOOST_TEST(n.error().message.find("char_device") != std::string::npos);
  } else {
    test::skip("mknod of a device node failed here: " + std::string(std::strerror(errno)));
  }
  // Uploading over a FIFO replaces the FIFO (nothing opens it).
  auto up = upload(f.root.get(), "pipe", "now a file", {f.owner});
  BOOST_REQUIRE(up);
  BOOST_TEST(f.read_host("ws/pipe") == "now a file");
}

BOOST_AUTO_TEST_CASE(an_upload_over_a_hard_link_leaves_the_other_name_alone) {
  ws_fixture f;
  f.write_host("ws/a", "original");
  BOOST_REQUIRE(::link(f.ws("a").c_str(), f.ws("b").c_str()) == 0);
  BOOST_REQUIRE(upload(f.root.get(), "b", "new", {f.owner}));
  BOOST_TEST(f.read_host("ws/a") == "original");
  BOOST_TEST(f.read_host("ws/b") == "new");
}

BOOST_AUTO_TEST_CASE(a_directory_swapped_for_a_symlink_mid_upload_changes_nothing_outside) {
  ws_fixture f;
  BOOST_REQUIRE(::mkdir(f.ws("d").c_str(), 0755) == 0);
  auto up = workspace_upload::begin(f.root.get(), wp("d/f"), {f.owner});
  BOOST_REQUIRE(up);
  BOOST_REQUIRE(up->write("first half "));
  // The sandbox moves the directory away and points its name outside.
  BOOST_REQUIRE(::rename(f.ws("d").c_str(), f.ws("moved").c_str()) == 0);
  BOOST_REQUIRE(::symlink(f.tmp.file("outside").c_str(), f.ws("d").c_str()) == 0);
  BOOST_REQUIRE(up->write("second half"));
  auto e = up->commit();
  BOOST_REQUIRE(e);
  BOOST_TEST(f.read_host("ws/moved/f") == "first half second half");
  BOOST_TEST(f.names("outside") == std::vector<std::string>{"secret"});
  // Between two calls the swapped name is refused.
  BOOST_TEST(!upload(f.root.get(), "d/f", "x", {f.owner}));
  BOOST_TEST(f.names("outside") == std::vector<std::string>{"secret"});

  // A download opened before the swap reads the file it opened.
  f.write_host("ws/moved/g", "the original g");
  auto d = workspace_download::open(f.root.get(), wp("moved/g"), 1 << 20);
  BOOST_REQUIRE(d);
  BOOST_REQUIRE(::rename(f.ws("moved/g").c_str(), f.ws("moved/g2").c_str()) == 0);
  BOOST_REQUIRE(::symlink("/etc/shadow", f.ws("moved/g").c_str()) == 0);
  auto chunk = d->read(1 << 20);
  BOOST_REQUIRE(chunk);
  BOOST_TEST(*chunk == "the original g");
}

BOOST_AUTO_TEST_CASE(a_temporary_file_swapped_by_the_sandbox_is_reported) {
  ws_fixture f;
  f.write_host("ws/t", "old");
  auto up = workspace_upload::begin(f.root.get(), wp("t"), {f.owner});
  BOOST_REQUIRE(up);
  BOOST_REQUIRE(up->write("sent"));
  std::string temp;
  for (const auto& n : f.names("ws"))
    if (n.rfind(".castellan-upload-", 0) == 0)
      temp = n;
  BOOST_REQUIRE(!temp.empty());
  // The sandbox renames the temporary file away and plants a symlink
  // under its name.
  BOOST_REQUIRE(::rename(f.ws(temp).c_str(), f.ws("stolen").c_str()) == 0);
  BOOST_REQUIRE(::symlink("/etc/shadow", f.ws(temp).c_str()) == 0);
  auto e = up->commit();
  BOOST_REQUIRE(!e);
  BOOST_TEST(files_error_code(e.error()) == "changed");
  BOOST_TEST(f.read_host("outside/secret") == "top secret");
}

BOOST_AUTO_TEST_CASE(a_file_that_shrinks_during_a_download_fails_it) {
  ws_fixture f;
  f.write_host("ws/s", std::string(4096, 'x'));
  auto d = workspace_download::open(f.root.get(), wp("s"));
  BOOST_REQUIRE(d);
  BOOST_REQUIRE(d->read(1000));
  BOOST_REQUIRE(::truncate(f.ws("s").c_str(), 10) == 0);
  auto r = d->read(1 << 20);
  BOOST_REQUIRE(!r);
  BOOST_TEST(files_error_code(r.error()) == "changed");
}

BOOST_AUTO_TEST_CASE(the_size_limit_refuses_and_leaves_the_old_file) {
  ws_fixture f;
  f.write_host("ws/big", "old content");
  upload_options o{f.owner};
  o.max_bytes = 1000;
  auto r = upload(f.root.get(), "big", std::string(1001, 'y'), o);
  BOOST_REQUIRE(!r);
  BOOST_TEST(files_error_code(r.error()) == "too_large");
  BOOST_TEST(f.read_host("ws/big") == "old content");
  BOOST_TEST(no_temp_files(f.names("ws")));
  auto d = workspace_download::open(f.root.get(), wp("big"), 5);
  BOOST_REQUIRE(!d);
  BOOST_TEST(files_error_code(d.error()) == "too_large");
}

BOOST_AUTO_TEST_CASE(list_stat_mkdir_and_remove) {
  ws_fixture f;
  BOOST_REQUIRE(make_directory(f.root.get(), wp("a/b/c"), true, f.owner));
  BOOST_REQUIRE(make_directory(f.root.get(), wp("a/b/c"), true, f.owner)); // exists: fine
  auto again = make_directory(f.root.get(), wp("a/b/c"), false, f.owner);
  BOOST_REQUIRE(!again);
  BOOST_TEST(files_error_code(again.error()) == "exists");
  auto no_parent = make_directory(f.root.get(), wp("x/y"), false, f.owner);
  BOOST_REQUIRE(!no_parent);
  BOOST_TEST(files_error_code(no_parent.error()) == "not_found");
  struct stat st{};
  BOOST_REQUIRE(::stat(f.ws("a/b").c_str(), &st) == 0);
  BOOST_TEST(st.st_uid == 12345u);
  BOOST_TEST((st.st_mode & 07777) == 0755u);
  upload_options parents{f.owner};
  parents.make_parents = true;
  BOOST_REQUIRE(upload(f.root.get(), "a/new/file.txt", "hello", parents));
  BOOST_REQUIRE(upload(f.root.get(), "a/z", "zz", {f.owner}));
  BOOST_REQUIRE(::mkfifo(f.ws("a/p").c_str(), 0600) == 0);
  BOOST_REQUIRE(::symlink("/etc", f.ws("a/l").c_str()) == 0);

  auto l = list_directory(f.root.get(), wp("a"));
  BOOST_REQUIRE(l);
  std::vector<std::string> got;
  for (const auto& e : l->entries)
    got.push_back(e.name + ":" + to_string(e.type));
  BOOST_TEST(got == (std::vector<std::string>{"b:directory", "l:symlink", "new:directory",
                                              "p:fifo", "z:file"}),
             boost::test_tools::per_element());
  BOOST_TEST(l->entries[4].size == 2u);
  BOOST_TEST(l->entries[1].link_target == "/etc");
  auto small = list_directory(f.root.get(), wp("a"), 2);
  BOOST_REQUIRE(small);
  BOOST_TEST(small->truncated);
  auto root = stat_entry(f.root.get(), wp("/workspace"));
  BOOST_REQUIRE(root);
  BOOST_TEST(to_string(root->type) == "directory");
  auto file_as_dir = list_directory(f.root.get(), wp("a/z"));
  BOOST_REQUIRE(!file_as_dir);
  BOOST_TEST(files_error_code(file_as_dir.error()) == "not_a_directory");
  auto dir_as_file = download(f.root.get(), "a");
  BOOST_REQUIRE(!dir_as_file);
  BOOST_TEST(files_error_code(dir_as_file.error()) == "is_a_directory");
  auto over_dir = upload(f.root.get(), "a/b", "x", {f.owner});
  BOOST_REQUIRE(!over_dir);
  BOOST_TEST(files_error_code(over_dir.error()) == "is_a_directory");

  auto not_empty = remove_entry(f.root.get(), wp("a"), false);
  BOOST_REQUIRE(!not_empty);
  BOOST_TEST(files_error_code(not_empty.error()) == "not_empty");
  BOOST_REQUIRE(remove_entry(f.root.get(), wp("a/z"), false));
  BOOST_REQUIRE(remove_entry(f.root.get(), wp("a/b/c"), false));
  auto gone = remove_entry(f.root.get(), wp("a/z"), false);
  BOOST_REQUIRE(!gone);
  BOOST_TEST(files_error_code(gone.error()) == "not_found");
  auto root_rm = remove_entry(f.root.get(), wp(""), true);
  BOOST_REQUIRE(!root_rm);
  BOOST_TEST(files_error_code(root_rm.error()) == "invalid_path");
  // Recursive: the symlink to /etc goes, /etc does not.
  BOOST_REQUIRE(remove_entry(f.root.get(), wp("a"), true));
  BOOST_TEST(f.names("ws").empty());
  BOOST_TEST(path_exists("/etc/passwd"));
}

BOOST_AUTO_TEST_CASE(mkdir_with_parents_refuses_a_symlinked_component) {
  ws_fixture f;
  BOOST_REQUIRE(::symlink(f.tmp.file("outside").c_str(), f.ws("s").c_str()) == 0);
  BOOST_REQUIRE(::mkdir(f.ws("real").c_str(), 0755) == 0);
  BOOST_REQUIRE(::symlink("real", f.ws("inner").c_str()) == 0);
  for (const char* p : {"s/x", "inner/x"}) {
    auto r = make_directory(f.root.get(), wp(p), true, f.owner);
    BOOST_REQUIRE_MESSAGE(!r.has_value(), p);
    BOOST_TEST(files_error_code(r.error()) == "escapes_workspace");
  }
  upload_options parents{f.owner};
  parents.make_parents = true;
  BOOST_TEST(!upload(f.root.get(), "s/y/z", "x", parents));
  BOOST_TEST(f.names("outside") == std::vector<std::string>{"secret"});
}

BOOST_AUTO_TEST_CASE(a_full_workspace_answers_no_space_and_keeps_the_old_file) {
  if (auto why = test::workspace_kernel_lacks()) {
    test::skip(*why);
    return;
  }
  if (!find_mke2fs()) {
    test::skip("no mke2fs (e2fsprogs)");
    return;
  }
  test::temp_dir tmp;
  test::mount_sweeper sweeper(tmp.path.string());
  unique_fd dir(::open(tmp.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  BOOST_REQUIRE(dir);
  unique_fd image(::openat(dir.get(), "v.ext4", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  BOOST_REQUIRE(image);
  BOOST_REQUIRE(::ftruncate(image.get(), 8 << 20) == 0);
  BOOST_REQUIRE(::mkdirat(dir.get(), "m", 0700) == 0);
  BOOST_REQUIRE(format_volume(image.get(), {0, 0}, "v"));
  auto mounted = mount_volume(image.get(), dir.get(), "m", "v");
  BOOST_REQUIRE_MESSAGE(mounted.has_value(), (mounted ? std::string() : mounted.error().describe()));
  {
    unique_fd root(::open(tmp.file("m").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    BOOST_REQUIRE(root);
    const auto old = all_bytes(1 << 20);
    BOOST_REQUIRE(upload(root.get(), "keep.bin", old, {{0, 0}}));
    auto r = upload(root.get(), "keep.bin", all_bytes(16 << 20), {{0, 0}});
    BOOST_REQUIRE(!r);
    BOOST_TEST(files_error_code(r.error()) == "no_space");
    BOOST_TEST(r.error().message.find("/workspace/keep.bin") != std::string::npos);
    auto back = download(root.get(), "keep.bin");
    BOOST_REQUIRE(back);
    BOOST_TEST((*back == old));
    std::vector<std::string> names;
    for (auto& e : std::filesystem::directory_iterator(tmp.file("m")))
      names.push_back(e.path().filename().string());
    BOOST_TEST(no_temp_files(names));
    // The space is back: a small upload fits.
    BOOST_TEST(upload(root.get(), "small", "fits", {{0, 0}}).has_value());
  }
  BOOST_REQUIRE(unmount_volume(dir.get(), "m"));
}

BOOST_AUTO_TEST_SUITE_END()
