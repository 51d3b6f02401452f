#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "actors/session/workspace_store.hpp"
#include "support/skip.hpp"
#include "support/temp_dir.hpp"
#include "support/workspace_support.hpp"

using namespace castellan;

namespace {

constexpr uint64_t mib = 1u << 20;

/// A store in a temporary directory; nothing of it stays mounted or
/// attached after the test, whatever happened.
struct store_fixture {
  test::temp_dir tmp;
  test::mount_sweeper sweeper{tmp.path.string()};
  std::string dir = tmp.file("workspaces");

  std::shared_ptr<workspace_store> open_store() {
    auto owner = sandbox_owner();
    BOOST_REQUIRE(owner);
    auto store = workspace_store::open({dir, *owner});
    BOOST_REQUIRE_MESSAGE(store, (store ? "" : store.error().describe()));
    return *store;
  }
};

bool skipped() {
  if (auto why = test::workspace_kernel_lacks()) {
    test::skip(*why);
    return true;
  }
  return false;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string failure_text(const outcome<void>& r) {
  return r ? std::string() : r.error().describe();
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(workspace_store_tests, store_fixture)

BOOST_AUTO_TEST_CASE(create_open_list_and_remove) {
  if (skipped())
    return;
  auto store = open_store();
  auto created = store->create("notes", 16 * mib);
  BOOST_REQUIRE_MESSAGE(created, failure_text(created));
  auto again = store->create("notes", 16 * mib);
  BOOST_TEST(failure_text(again).find("workspace 'notes' already exists") != std::string::npos);
  BOOST_TEST(failure_text(store->create("tiny", 1 * mib)).find("outside") != std::string::npos);
  auto missing = store->open_workspace("missing");
  BOOST_REQUIRE(!missing);
  BOOST_TEST(missing.error().message == "no workspace 'missing'");
  {
    auto lease = store->open_workspace("notes");
    BOOST_REQUIRE_MESSAGE(lease, (lease ? "" : lease.error().describe()));
    BOOST_TEST(lease->host_path() == store->directory() + "/mounts/notes");
    std::ofstream(lease->host_path() + "/a.txt") << "hello";
    auto all = store->list();
    BOOST_REQUIRE(all);
    BOOST_REQUIRE_EQUAL(all->size(), 1u);
    const auto& info = all->front();
    BOOST_TEST(info.name == "notes");
    BOOST_TEST(info.quota_bytes == 16 * mib);
    BOOST_TEST(info.mounted);
    BOOST_TEST(info.users == 1u);
    BOOST_TEST(info.used_bytes > 0u);
    BOOST_TEST(info.free_bytes > 8 * mib);
    // Allocated whole at create, not sparse (its extent tree a few blocks more).
    BOOST_TEST(info.image_bytes >= info.quota_bytes);
    BOOST_TEST(info.image_bytes <= info.quota_bytes + 64 * 1024);
    // The owner is the sandbox's host user: its code can write the root.
    struct stat st;
    BOOST_REQUIRE(::stat(lease->host_path().c_str(), &st) == 0);
    BOOST_TEST(st.st_uid == sandbox_owner()->uid);
    auto refused = store->remove("notes");
    BOOST_TEST(failure_text(refused).find("workspace 'notes' is in use (1 lease open)") !=
               std::string::npos);
  }
  auto removed = store->remove("notes");
  BOOST_REQUIRE_MESSAGE(removed, failure_text(removed));
  BOOST_TEST(store->list()->empty());
  BOOST_TEST(failure_text(store->remove("notes")).find("no workspace 'notes'") !=
             std::string::npos);
  BOOST_TEST(test::nothing_left_below(tmp.path.string()));
}

BOOST_AUTO_TEST_CASE(on_the_host_a_workspace_runs_nothing_and_follows_no_symlink) {
  if (skipped())
    return;
  auto store = open_store();
  BOOST_REQUIRE(store->create("hostile", 8 * mib));
  auto lease = store->open_workspace("hostile");
  BOOST_REQUIRE(lease);
  BOOST_REQUIRE(lease->root() && *lease->root());
  const std::string mounted = lease->host_path();
  // What code in a sandbox could leave there: a link to a host file and a
  // program. The daemon (root) neither follows the one nor runs the other.
  BOOST_REQUIRE(::symlink("/etc/hostname", (mounted + "/link").c_str()) == 0);
  errno = 0;
  BOOST_TEST(::open((mounted + "/link").c_str(), O_RDONLY | O_CLOEXEC) == -1);
  BOOST_TEST(errno == ELOOP);
  {
    std::ofstream(mounted + "/prog") << "#!/bin/sh\nexit 0\n";
  }
  BOOST_REQUIRE(::chmod((mounted + "/prog").c_str(), 0755) == 0);
  BOOST_TEST(::access((mounted + "/prog").c_str(), X_OK) == -1);
  // The last lease unmounts it: no mount stays behind for a workspace no
  // one uses.
  lease->release();
  BOOST_TEST(test::mounts_below(store->directory()).empty());
  BOOST_TEST(!store->list()->front().mounted);
  BOOST_TEST(static_cast<bool>(store->remove("hostile")));
}

BOOST_AUTO_TEST_CASE(caps_and_disk_space_are_checked_at_create) {
  if (skipped())
    return;
  auto owner = sandbox_owner();
  BOOST_REQUIRE(owner);
  workspace_store_options o{dir, *owner};
  o.max_workspaces = 3;
  o.max_total_quota_bytes = 20 * mib;
  auto store = workspace_store::open(o);
  BOOST_REQUIRE(store);
  BOOST_REQUIRE((*store)->create("a", 8 * mib));
  BOOST_REQUIRE((*store)->create("b", 8 * mib));
  auto over = (*store)->create("c", 8 * mib); // 24 MiB of quotas > 20 MiB
  BOOST_REQUIRE(!over);
  BOOST_TEST(over.error().code == EDQUOT);
  BOOST_TEST(over.error().message.find("above its maximum") != std::string::npos,
             over.error().message);
  BOOST_REQUIRE((*store)->create("c", 4 * mib));
  auto fourth = (*store)->create("d", 4 * mib);
  BOOST_REQUIRE(!fourth);
  BOOST_TEST(fourth.error().code == EDQUOT);
  BOOST_TEST(fourth.error().message.find("its maximum") != std::string::npos);
  // A quota the host's disk cannot hold: refused before anything is written.
  BOOST_REQUIRE((*store)->remove("c"));
  workspace_store_options big{dir + "2", *owner};
  auto roomy = workspace_store::open(big);
  BOOST_REQUIRE(roomy);
  auto huge = (*roomy)->create("huge", 15ull << 40);
  BOOST_REQUIRE(!huge);
  BOOST_TEST(huge.error().code == ENOSPC);
  BOOST_TEST(huge.error().message.find("bytes free") != std::string::npos);
  BOOST_TEST((*roomy)->list()->empty());
}

BOOST_AUTO_TEST_CASE(bad_names_are_refused_by_every_operation) {
  if (skipped())
    return;
  auto store = open_store();
  for (const std::string& name : std::vector<std::string>{"a/b", "..", ".", "../escape",
                                                          std::string(64, 'x'), ""}) {
    BOOST_TEST(!store->create(name, 16 * mib), name);
    BOOST_TEST(!store->open_workspace(name), name);
    BOOST_TEST(!store->remove(name), name);
  }
  BOOST_TEST(failure_text(store->create("a/b", 16 * mib)).find("contains '/'") !=
             std::string::npos);
  BOOST_TEST(store->list()->empty());
  // Nothing was made outside the store's directories.
  BOOST_TEST(!test::mounts_below(tmp.path.string()).size());
  struct stat st;
  BOOST_TEST(::stat(tmp.file("escape").c_str(), &st) != 0);
}

BOOST_AUTO_TEST_CASE(concurrent_opens_share_one_mount) {
  if (skipped())
    return;
  auto store = open_store();
  BOOST_REQUIRE(store->create("shared", 8 * mib));
  auto a = store->open_workspace("shared");
  auto b = store->open_workspace("shared");
  BOOST_REQUIRE(a);
  BOOST_REQUIRE(b);
  BOOST_TEST(a->host_path() == b->host_path());
  BOOST_TEST(test::mounts_below(store->directory()).size() == 1u);
  BOOST_TEST(test::loops_below(store->directory()).size() == 1u);
  BOOST_TEST(store->list()->front().users == 2u);
  a->release();
  BOOST_TEST(!store->remove("shared")); // b still holds it
  b->release();
  BOOST_TEST(static_cast<bool>(store->remove("shared")));
  BOOST_TEST(test::nothing_left_below(tmp.path.string()));
}

BOOST_AUTO_TEST_CASE(workspaces_survive_a_restart_and_one_process_owns_a_store) {
  if (skipped())
    return;
  {
    auto store = open_store();
    BOOST_REQUIRE(store->create("keep", 8 * mib));
    auto lease = store->open_workspace("keep");
    BOOST_REQUIRE(lease);
    std::ofstream(lease->host_path() + "/kept.txt") << "still here";
    auto second = workspace_store::open({dir, *sandbox_owner()});
    BOOST_REQUIRE(!second);
    BOOST_TEST(second.error().message.find("another process has it open") != std::string::npos);
  }
  // The store unmounted everything when it went.
  BOOST_TEST(test::nothing_left_below(tmp.path.string()));
  auto store = open_store();
  auto all = store->list();
  BOOST_REQUIRE(all);
  BOOST_REQUIRE_EQUAL(all->size(), 1u);
  BOOST_TEST(!all->front().mounted);
  auto lease = store->open_workspace("keep");
  BOOST_REQUIRE(lease);
  BOOST_TEST(slurp(lease->host_path() + "/kept.txt") == "still here");
}

BOOST_AUTO_TEST_CASE(a_killed_process_leaves_mounts_the_next_store_recovers) {
  if (skipped())
    return;
  int ready[2];
  BOOST_REQUIRE(::pipe(ready) == 0);
  const pid_t child = ::fork();
  BOOST_REQUIRE(child >= 0);
  if (child == 0) {
    ::close(ready[0]);
    auto owner = sandbox_owner();
    auto store = owner ? workspace_store::open({dir, *owner})
                       : outcome<std::shared_ptr<workspace_store>>(owner.error());
    if (!store || !(*store)->create("left", 8 * mib) || !(*store)->create("other", 8 * mib))
      ::_exit(1);
    auto lease = (*store)->open_workspace("left");
    if (!lease)
      ::_exit(2);
    std::ofstream(lease->host_path() + "/before-kill.txt") << "written";
    // A mount that is no workspace's, where one of them belongs, and one
    // under a name no image has.
    ::mkdirat(::open(((*store)->directory() + "/mounts").c_str(), O_PATH), "stray", 0700);
    if (::mount("tmpfs", ((*store)->directory() + "/mounts/other").c_str(), "tmpfs", 0,
                "size=1m") != 0 ||
        ::mount("tmpfs", ((*store)->directory() + "/mounts/stray").c_str(), "tmpfs", 0,
                "size=1m") != 0)
      ::_exit(3);
    (void)!::write(ready[1], "r", 1);
    for (;;)
      ::pause();
  }
  ::close(ready[1]);
  char c = 0;
  const bool child_ready = ::read(ready[0], &c, 1) == 1;
  ::close(ready[0]);
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  BOOST_REQUIRE_MESSAGE(child_ready, "the child failed before it was killed: " << status);
  const std::string mounts = tmp.file("workspaces") + "/mounts";
  BOOST_TEST(test::mounts_below(mounts).size() == 3u); // left behind by the kill
  BOOST_TEST(test::loops_below(tmp.path.string()).size() == 1u);

  auto store = open_store();
  // The foreign mounts (on "stray", and on "other" where its image belongs)
  // went; "left" was adopted, not mounted again.
  auto points = test::mounts_below(mounts);
  BOOST_REQUIRE_EQUAL(points.size(), 1u);
  BOOST_TEST(points.front() == mounts + "/left");
  auto all = store->list();
  BOOST_REQUIRE(all);
  BOOST_REQUIRE_EQUAL(all->size(), 2u);
  BOOST_TEST(all->at(0).name == "left");
  BOOST_TEST(all->at(0).mounted);
  BOOST_TEST(all->at(0).users == 0u);
  auto lease = store->open_workspace("left");
  BOOST_REQUIRE(lease);
  BOOST_TEST(slurp(lease->host_path() + "/before-kill.txt") == "written");
  BOOST_TEST(test::mounts_below(lease->host_path()).size() == 1u);
  BOOST_TEST(test::loops_below(tmp.path.string()).size() == 1u);
  // "other" opens onto its own file system.
  auto other = store->open_workspace("other");
  BOOST_REQUIRE_MESSAGE(other, (other ? "" : other.error().describe()));
  auto on_other = platform::mounts_at_or_below(other->host_path());
  BOOST_REQUIRE(on_other);
  BOOST_REQUIRE_EQUAL(on_other->size(), 1u);
  BOOST_TEST(on_other->front().fs_type == "ext4");
  lease->release();
  other->release();
  BOOST_TEST(static_cast<bool>(store->remove("left")));
  BOOST_TEST(static_cast<bool>(store->remove("other")));
  BOOST_TEST(test::nothing_left_below(tmp.path.string()));
}

BOOST_AUTO_TEST_CASE(a_symlink_planted_in_the_store_redirects_nothing) {
  if (skipped())
    return;
  auto store = open_store();
  BOOST_REQUIRE(store->create("target", 8 * mib));
  const std::string decoy = tmp.file("decoy");
  BOOST_REQUIRE(::mkdir(decoy.c_str(), 0700) == 0);
  // The mount point replaced by a symlink to a directory of the attacker's.
  const std::string point = store->directory() + "/mounts/target";
  BOOST_REQUIRE(::rmdir(point.c_str()) == 0);
  BOOST_REQUIRE(::symlink(decoy.c_str(), point.c_str()) == 0);
  auto refused = store->open_workspace("target");
  BOOST_REQUIRE(!refused);
  BOOST_TEST(refused.error().describe().find("no symlink followed") != std::string::npos,
             refused.error().describe());
  BOOST_TEST(test::mounts_below(decoy).empty());
  // The image replaced by a symlink to another file.
  std::ofstream(tmp.file("victim")) << "not an image";
  const std::string image = store->directory() + "/images/target.ext4";
  BOOST_REQUIRE(::unlink(image.c_str()) == 0);
  BOOST_REQUIRE(::symlink(tmp.file("victim").c_str(), image.c_str()) == 0);
  BOOST_TEST(!store->open_workspace("target"));
  BOOST_TEST(!store->remove("target"));
  BOOST_TEST(slurp(tmp.file("victim")) == "not an image");
  BOOST_TEST(test::nothing_left_below(tmp.path.string()));
}

BOOST_AUTO_TEST_CASE(without_privileges_the_error_says_what_is_needed) {
  if (skipped())
    return;
  int out[2];
  BOOST_REQUIRE(::pipe(out) == 0);
  const pid_t child = ::fork();
  BOOST_REQUIRE(child >= 0);
  if (child == 0) {
    ::close(out[0]);
    // A user namespace of its own: every capability there, none in the
    // initial one.
    if (::unshare(CLONE_NEWUSER) != 0)
      ::_exit(1);
    auto store = workspace_store::open({dir, platform::volume_owner{65534, 65534}});
    const std::string text = store ? "opened" : store.error().describe();
    (void)!::write(out[1], text.data(), text.size());
    ::_exit(0);
  }
  ::close(out[1]);
  std::string text;
  char buf[512];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;)
    text.append(buf, static_cast<std::size_t>(n));
  ::close(out[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  BOOST_REQUIRE(WIFEXITED(status));
  BOOST_REQUIRE(WEXITSTATUS(status) == 0);
  BOOST_TEST(text.find("CAP_SYS_ADMIN in the initial user namespace") != std::string::npos, text);
  BOOST_TEST(text.find("run the supervisor as root") != std::string::npos, text);
}

BOOST_AUTO_TEST_SUITE_END()
