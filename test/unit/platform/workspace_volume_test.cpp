#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

#include "ipc/unique_fd.hpp"
#include "platform/linux/loop_device.hpp"
#include "platform/linux/mount_table.hpp"
#include "platform/linux/workspace_volume.hpp"
#include "support/skip.hpp"
#include "support/temp_dir.hpp"
#include "support/workspace_support.hpp"

using namespace castellan;
using namespace castellan::platform;

namespace {

/// A temporary directory with an image file and a mount point in it, all
/// unmounted and detached at the end whatever the test did.
struct volume_dir {
  test::temp_dir tmp;
  test::mount_sweeper sweeper{tmp.path.string()};
  unique_fd dir;
  unique_fd image;

  explicit volume_dir(uint64_t size) {
    dir.reset(::open(tmp.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    BOOST_REQUIRE(dir);
    image.reset(::openat(dir.get(), "v.ext4", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    BOOST_REQUIRE(image);
    BOOST_REQUIRE(::ftruncate(image.get(), static_cast<off_t>(size)) == 0);
    BOOST_REQUIRE(::mkdirat(dir.get(), "m", 0700) == 0);
  }
  std::string mount_point() const { return tmp.file("m"); }
};

bool skipped() {
  if (auto why = test::workspace_kernel_lacks()) {
    test::skip(*why);
    return true;
  }
  return false;
}

} // namespace

BOOST_AUTO_TEST_SUITE(mount_table_tests)

BOOST_AUTO_TEST_CASE(parses_lines_and_decodes_escapes) {
  auto m = parse_mountinfo(
    "36 35 98:0 /mnt1 /mnt/with\\040space rw,noatime master:1 - ext3 /dev/root rw\n"
    "37 36 7:3 / /srv/ws rw shared:2 master:3 - ext4 /dev/loop3 rw\n");
  BOOST_REQUIRE(m);
  BOOST_REQUIRE_EQUAL(m->size(), 2u);
  BOOST_TEST((*m)[0].mount_point == "/mnt/with space");
  BOOST_TEST((*m)[0].root == "/mnt1");
  BOOST_TEST((*m)[0].fs_type == "ext3");
  BOOST_TEST((*m)[1].device == makedev(7, 3));
  BOOST_TEST((*m)[1].source == "/dev/loop3");
  BOOST_TEST(!parse_mountinfo("36 35 98:0 /mnt1 /mnt rw\n"));
}

BOOST_AUTO_TEST_CASE(finds_the_mounts_below_a_directory_only) {
  test::temp_dir tmp;
  test::mount_sweeper sweeper(tmp.path.string());
  ::mkdir(tmp.file("a").c_str(), 0700);
  ::mkdir(tmp.file("ab").c_str(), 0700);
  BOOST_REQUIRE(::mount("tmpfs", tmp.file("ab").c_str(), "tmpfs", 0, "size=1m") == 0);
  auto below = mounts_at_or_below(tmp.file("a"));
  BOOST_REQUIRE(below);
  BOOST_TEST(below->empty()); // "a" does not cover "ab"
  BOOST_REQUIRE(::mount("tmpfs", tmp.file("a").c_str(), "tmpfs", 0, "size=1m") == 0);
  below = mounts_at_or_below(tmp.file("a"));
  BOOST_REQUIRE(below);
  BOOST_REQUIRE_EQUAL(below->size(), 1u);
  BOOST_TEST(below->front().mount_point == tmp.file("a"));
  BOOST_TEST(below->front().fs_type == "tmpfs");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(workspace_volume_tests)

BOOST_AUTO_TEST_CASE(a_volume_is_owned_as_asked_and_full_at_its_size) {
  if (skipped())
    return;
  volume_dir v(16u << 20);
  auto formatted = format_volume(v.image.get(), volume_owner{65534, 65534}, "test volume");
  BOOST_REQUIRE_MESSAGE(formatted, (formatted ? "" : formatted.error().describe()));
  auto state = probe_mount_point(v.dir.get(), "m", v.image.get());
  BOOST_REQUIRE(state);
  BOOST_TEST((*state == mount_point_state::empty));
  auto mounted = mount_volume(v.image.get(), v.dir.get(), "m", "test volume");
  BOOST_REQUIRE_MESSAGE(mounted, (mounted ? "" : mounted.error().describe()));
  state = probe_mount_point(v.dir.get(), "m", v.image.get());
  BOOST_REQUIRE(state);
  BOOST_TEST((*state == mount_point_state::this_image));
  struct stat root;
  BOOST_REQUIRE(::stat(v.mount_point().c_str(), &root) == 0);
  BOOST_TEST(root.st_uid == 65534u);
  BOOST_TEST(root.st_gid == 65534u);
  auto m = mounts_at_or_below(v.mount_point());
  BOOST_REQUIRE(m);
  BOOST_REQUIRE_EQUAL(m->size(), 1u);
  BOOST_TEST(m->front().fs_type == "ext4");
  auto usage = usage_of(v.dir.get(), "m");
  BOOST_REQUIRE(usage);
  BOOST_TEST(usage->size_bytes <= 16u << 20);
  BOOST_TEST(usage->free_bytes > 8u << 20);
  // Fill it: the kernel refuses the block past the end with ENOSPC.
  const std::string file = v.mount_point() + "/fill";
  unique_fd f(::open(file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
  BOOST_REQUIRE(f);
  std::vector<char> chunk(1u << 20, 'x');
  int err = 0;
  uint64_t written = 0;
  for (int i = 0; i < 64 && err == 0; ++i) {
    const ssize_t n = ::write(f.get(), chunk.data(), chunk.size());
    if (n < 0)
      err = errno;
    else
      written += static_cast<uint64_t>(n);
  }
  if (err == 0 && ::fsync(f.get()) != 0)
    err = errno;
  BOOST_TEST(err == ENOSPC);
  BOOST_TEST(written < (16u << 20));
  f.reset();
  auto unmounted = unmount_volume(v.dir.get(), "m");
  BOOST_REQUIRE_MESSAGE(unmounted, (unmounted ? "" : unmounted.error().describe()));
  BOOST_TEST(test::nothing_left_below(v.tmp.path.string()));
  // Unmounting nothing is no error.
  BOOST_TEST(static_cast<bool>(unmount_volume(v.dir.get(), "m")));
}

BOOST_AUTO_TEST_CASE(a_second_mount_reuses_the_loop_device_of_the_image) {
  if (skipped())
    return;
  volume_dir v(8u << 20);
  BOOST_REQUIRE(format_volume(v.image.get(), volume_owner{1000, 1000}, "test volume"));
  BOOST_REQUIRE(::mkdirat(v.dir.get(), "m2", 0700) == 0);
  BOOST_REQUIRE(mount_volume(v.image.get(), v.dir.get(), "m", "test volume"));
  BOOST_REQUIRE(mount_volume(v.image.get(), v.dir.get(), "m2", "test volume"));
  BOOST_TEST(test::loops_below(v.tmp.path.string()).size() == 1u);
  struct stat a, b;
  BOOST_REQUIRE(::stat(v.mount_point().c_str(), &a) == 0);
  BOOST_REQUIRE(::stat(v.tmp.file("m2").c_str(), &b) == 0);
  BOOST_TEST(a.st_dev == b.st_dev); // one file system, seen twice
  BOOST_REQUIRE(unmount_volume(v.dir.get(), "m"));
  BOOST_REQUIRE(unmount_volume(v.dir.get(), "m2"));
  BOOST_TEST(test::nothing_left_below(v.tmp.path.string()));
}

BOOST_AUTO_TEST_CASE(a_foreign_mount_is_told_apart_and_a_symlink_is_not_followed) {
  if (skipped())
    return;
  volume_dir v(8u << 20);
  BOOST_REQUIRE(format_volume(v.image.get(), volume_owner{1000, 1000}, "test volume"));
  BOOST_REQUIRE(::mount("tmpfs", v.mount_point().c_str(), "tmpfs", 0, "size=1m") == 0);
  auto state = probe_mount_point(v.dir.get(), "m", v.image.get());
  BOOST_REQUIRE(state);
  BOOST_TEST((*state == mount_point_state::other));
  BOOST_REQUIRE(unmount_volume(v.dir.get(), "m"));
  BOOST_TEST(test::mounts_below(v.tmp.path.string()).empty());
  // A symlink where the mount point should be leads nowhere.
  BOOST_REQUIRE(::mkdirat(v.dir.get(), "elsewhere", 0700) == 0);
  BOOST_REQUIRE(::symlinkat("elsewhere", v.dir.get(), "link") == 0);
  auto refused = mount_volume(v.image.get(), v.dir.get(), "link", "test volume");
  BOOST_REQUIRE(!refused);
  BOOST_TEST(refused.error().message.find("no symlink followed") != std::string::npos);
  BOOST_TEST(test::mounts_below(v.tmp.path.string()).empty());
  BOOST_TEST(test::nothing_left_below(v.tmp.path.string()));
}

BOOST_AUTO_TEST_CASE(a_file_that_is_no_file_system_is_refused_with_the_kernels_reason) {
  if (skipped())
    return;
  volume_dir v(8u << 20); // never formatted: zeros
  auto refused = mount_volume(v.image.get(), v.dir.get(), "m", "test volume");
  BOOST_REQUIRE(!refused);
  BOOST_TEST(refused.error().describe().find("mount test volume from /dev/loop") !=
             std::string::npos, refused.error().describe());
  BOOST_TEST(test::nothing_left_below(v.tmp.path.string()));
}

BOOST_AUTO_TEST_SUITE_END()
