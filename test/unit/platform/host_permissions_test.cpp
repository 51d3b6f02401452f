#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "platform/linux/host_permissions.hpp"
#include "platform/linux/landlock.hpp"
#include "support/skip.hpp"

using namespace castellan::platform;

namespace {

/// A host directory bound writable at /srv/out of a root whose /tmp is a
/// tmpfs, and the ids of a worker under a root supervisor.
struct host_tree {
  std::string dir;
  root_spec root;
  sandbox_host_ids nobody{65534, 65534, {}};

  host_tree() {
    char pattern[] = "/var/tmp/castellan-hostperm-XXXXXX";
    BOOST_REQUIRE(::mkdtemp(pattern) != nullptr);
    dir = pattern;
    BOOST_REQUIRE(::chmod(dir.c_str(), 0755) == 0);
    std::ofstream(dir + "/data.txt") << "x\n";
    BOOST_REQUIRE(::chmod((dir + "/data.txt").c_str(), 0644) == 0);
    bind_mount b;
    b.source = dir;
    b.target = "/srv/out";
    b.writable = true;
    root.binds.push_back(b);
    root.tmpfs.push_back({"/tmp", 1 << 20, 01777, true});
  }
  ~host_tree() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  std::optional<std::string> refusal(const char* path, uint64_t access) const {
    return host_refusal(root, nobody, path, access);
  }
};

bool running_as_root() {
  if (::geteuid() == 0)
    return true;
  castellan::test::skip("host_permissions: not root, cannot chown test files");
  return false;
}

} // namespace

BOOST_AUTO_TEST_SUITE(host_permissions_tests)

BOOST_AUTO_TEST_CASE(a_root_owned_directory_refuses_the_sandbox_uid) {
  if (!running_as_root())
    return;
  host_tree t;
  BOOST_REQUIRE(::chown(t.dir.c_str(), 0, 0) == 0);
  auto create = t.refusal("/srv/out/new", landlock_fs::make_reg);
  BOOST_REQUIRE(create);
  BOOST_TEST(create->find("host uid 65534 may not create files in " + t.dir) != std::string::npos,
             *create);
  BOOST_TEST(create->find("owner 0:0, mode 0755") != std::string::npos, *create);
  auto write = t.refusal("/srv/out/data.txt", landlock_fs::write_file);
  BOOST_REQUIRE(write);
  BOOST_TEST(write->find("may not write " + t.dir + "/data.txt") != std::string::npos, *write);
  BOOST_TEST(!t.refusal("/srv/out/data.txt", landlock_fs::read_file));
  BOOST_TEST(!t.refusal("/srv/out", landlock_fs::read_dir));
  auto remove = t.refusal("/srv/out/data.txt", landlock_fs::remove_file);
  BOOST_REQUIRE(remove);
  BOOST_TEST(remove->find("may not remove files from") != std::string::npos, *remove);
  const auto warnings = unwritable_binds(t.root, t.nobody);
  BOOST_REQUIRE(warnings.size() == 1u);
  BOOST_TEST(warnings[0].find("/srv/out: writable by the policy") == 0u, warnings[0]);
  BOOST_TEST(warnings[0].find("chown 65534") != std::string::npos, warnings[0]);
}

BOOST_AUTO_TEST_CASE(a_directory_the_sandbox_uid_owns_is_writable) {
  if (!running_as_root())
    return;
  host_tree t;
  BOOST_REQUIRE(::chown(t.dir.c_str(), 65534, 65534) == 0);
  BOOST_TEST(!t.refusal("/srv/out/new", landlock_fs::make_reg | landlock_fs::make_dir));
  // The file is still root's and 0644: writing it is not the directory's call.
  BOOST_TEST(!!t.refusal("/srv/out/data.txt", landlock_fs::write_file));
  BOOST_TEST(!t.refusal("/srv/out/data.txt", landlock_fs::remove_file)); // not sticky
  BOOST_TEST(unwritable_binds(t.root, t.nobody).empty());
  // The owner's bits count even when they grant less than others'.
  BOOST_REQUIRE(::chmod(t.dir.c_str(), 0577) == 0);
  BOOST_TEST(!!t.refusal("/srv/out/new", landlock_fs::make_reg));
  BOOST_TEST(unwritable_binds(t.root, t.nobody).size() == 1u);
}

BOOST_AUTO_TEST_CASE(group_bits_and_supplementary_groups) {
  if (!running_as_root())
    return;
  host_tree t;
  BOOST_REQUIRE(::chown(t.dir.c_str(), 0, 4242) == 0);
  BOOST_REQUIRE(::chmod(t.dir.c_str(), 0775) == 0);
  BOOST_TEST(!!t.refusal("/srv/out/new", landlock_fs::make_reg));
  sandbox_host_ids member{1000, 1000, {4242}};
  BOOST_TEST(!host_refusal(t.root, member, "/srv/out/new", landlock_fs::make_reg));
}

BOOST_AUTO_TEST_CASE(every_directory_on_the_way_must_be_searchable) {
  if (!running_as_root())
    return;
  host_tree t;
  BOOST_REQUIRE(::chown(t.dir.c_str(), 65534, 65534) == 0);
  const std::string sub = t.dir + "/private";
  BOOST_REQUIRE(::mkdir(sub.c_str(), 0700) == 0);
  std::ofstream(sub + "/f") << "x";
  BOOST_REQUIRE(::chmod((sub + "/f").c_str(), 0666) == 0);
  auto r = t.refusal("/srv/out/private/f", landlock_fs::read_file);
  BOOST_REQUIRE(r);
  BOOST_TEST(r->find("may not search " + sub) != std::string::npos, *r);
}

BOOST_AUTO_TEST_CASE(the_sticky_bit_protects_other_owners_files) {
  if (!running_as_root())
    return;
  host_tree t;
  BOOST_REQUIRE(::chmod(t.dir.c_str(), 01777) == 0);
  auto r = t.refusal("/srv/out/data.txt", landlock_fs::remove_file);
  BOOST_REQUIRE(r);
  BOOST_TEST(r->find("remove files of other owners") != std::string::npos, *r);
  BOOST_REQUIRE(::chown((t.dir + "/data.txt").c_str(), 65534, 65534) == 0);
  BOOST_TEST(!t.refusal("/srv/out/data.txt", landlock_fs::remove_file));
}

BOOST_AUTO_TEST_CASE(what_mode_bits_cannot_tell_is_left_alone) {
  if (!running_as_root())
    return;
  host_tree t;
  BOOST_REQUIRE(::chown(t.dir.c_str(), 0, 0) == 0);
  // Outside every bind, and on the tmpfs: not the host's to decide.
  BOOST_TEST(!t.refusal("/tmp/x", landlock_fs::make_reg));
  BOOST_TEST(!t.refusal("/elsewhere/x", landlock_fs::make_reg));
  // A symlink resolves in the sandbox's root, not the host's.
  BOOST_REQUIRE(::symlink("/etc/passwd", (t.dir + "/link").c_str()) == 0);
  BOOST_TEST(!t.refusal("/srv/out/link", landlock_fs::write_file));
  // A missing file: nothing to decide about the file itself.
  BOOST_TEST(!t.refusal("/srv/out/absent", landlock_fs::write_file));
  // An access ACL granting uid 65534 rwx: the mode bits do not tell.
  struct [[gnu::packed]] entry {
    uint16_t tag, perm;
    uint32_t id;
  };
  struct [[gnu::packed]] {
    uint32_t version = 2;
    entry e[5] = {{0x01, 7, 0xffffffff}, {0x02, 7, 65534}, {0x04, 5, 0xffffffff},
                  {0x10, 7, 0xffffffff}, {0x20, 5, 0xffffffff}};
  } acl;
  if (::setxattr(t.dir.c_str(), "system.posix_acl_access", &acl, sizeof acl, 0) != 0) {
    castellan::test::skip("host_permissions: no POSIX ACLs on /var/tmp (errno " +
                          std::to_string(errno) + "): the ACL case");
    return;
  }
  BOOST_TEST(!t.refusal("/srv/out/new", landlock_fs::make_reg));
  BOOST_TEST(unwritable_binds(t.root, t.nobody).empty());
}

BOOST_AUTO_TEST_SUITE_END()
