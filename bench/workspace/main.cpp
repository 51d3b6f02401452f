/// @file main.cpp
/// The workspace store's operations (actors/session/workspace_store.hpp),
/// on real loop devices and ext4, each beside a baseline from the same run:
///  - create (a sparse image, mke2fs, rename into place). Baseline: the same
///    mke2fs on a file of the same size, run directly.
///  - open, first (find or attach a loop device, mount), and open while
///    mounted (a second lease on the shared mount). Baseline: mounting and
///    unmounting a tmpfs on the same kind of directory.
///  - remove (unmount, unlink the image). Baseline: the tmpfs again.
/// Needs root (loop devices, mounts); the store lives in a temporary
/// directory on the same file system as /var/tmp.
///
/// Usage: bench_workspace [samples] [MiB]   (default 50 samples of 64 MiB)

#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "actors/session/workspace_store.hpp"
#include "support/percentiles.hpp"

extern char** environ;

namespace {

using namespace castellan;
using clock_type = std::chrono::steady_clock;

double millis(clock_type::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

void row(const char* what, bench::samples& s, const char* baseline_what, bench::samples& b) {
  std::printf("%-28s p50 %8.2f ms  p99 %8.2f ms   | %-28s p50 %8.2f ms  p99 %8.2f ms\n", what,
              s.percentile(0.5), s.percentile(0.99), baseline_what, b.percentile(0.5),
              b.percentile(0.99));
}

bool run_mke2fs(const std::string& file) {
  std::string args[] = {"/usr/sbin/mke2fs", "-q", "-F", "-t", "ext4", "-m", "0", "-E",
                        "root_owner=65534:65534,nodiscard", file};
  char* argv[11] = {};
  for (int i = 0; i < 10; ++i)
    argv[i] = args[i].data();
  pid_t pid = -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  int status = 0;
  return rc == 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
         WEXITSTATUS(status) == 0;
}

} // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 50;
  const uint64_t mib = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 64;
  char tmpl[] = "/var/tmp/castellan-bench-ws-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  const std::string base = tmpl;
  int rc = 0;
  {
    auto owner = sandbox_owner();
    auto opened = owner ? workspace_store::open({base + "/workspaces", *owner})
                        : outcome<std::shared_ptr<workspace_store>>(owner.error());
    if (!opened) {
      std::fprintf(stderr, "bench_workspace: %s\n", opened.error().describe().c_str());
      std::filesystem::remove_all(base);
      return 1;
    }
    auto store = *opened;
    bench::samples create, first_open, shared_open, list, remove, mkfs, tmpfs_mount, tmpfs_umount;
    const std::string plain = base + "/plain.img";
    const std::string point = base + "/point";
    ::mkdir(point.c_str(), 0700);
    for (int i = 0; i < n && rc == 0; ++i) {
      const std::string name = "ws" + std::to_string(i);
      auto t0 = clock_type::now();
      auto c = store->create(name, mib << 20);
      auto t1 = clock_type::now();
      auto a = store->open_workspace(name);
      auto t2 = clock_type::now();
      auto b = store->open_workspace(name);
      auto t3 = clock_type::now();
      auto l = store->list();
      auto t4 = clock_type::now();
      if (!c || !a || !b || !l) {
        std::fprintf(stderr, "bench_workspace: %s\n",
                     (!c ? c.error() : !a ? a.error() : !b ? b.error() : l.error())
                       .describe()
                       .c_str());
        rc = 1;
        break;
      }
      a->release();
      b->release();
      auto t5 = clock_type::now();
      auto r = store->remove(name);
      auto t6 = clock_type::now();
      if (!r) {
        std::fprintf(stderr, "bench_workspace: %s\n", r.error().describe().c_str());
        rc = 1;
      }
      create.add(millis(t1 - t0));
      first_open.add(millis(t2 - t1));
      shared_open.add(millis(t3 - t2));
      list.add(millis(t4 - t3));
      remove.add(millis(t6 - t5));
      // Baselines, interleaved one for one.
      const int fd = ::open(plain.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      auto b0 = clock_type::now();
      if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(mib << 20)) != 0 || !run_mke2fs(plain))
        rc = 1;
      auto b1 = clock_type::now();
      if (fd >= 0)
        ::close(fd);
      ::unlink(plain.c_str());
      auto m0 = clock_type::now();
      if (::mount("tmpfs", point.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=1m") != 0)
        rc = 1;
      auto m1 = clock_type::now();
      if (::umount2(point.c_str(), 0) != 0)
        rc = 1;
      auto m2 = clock_type::now();
      mkfs.add(millis(b1 - b0));
      tmpfs_mount.add(millis(m1 - m0));
      tmpfs_umount.add(millis(m2 - m1));
    }
    if (rc == 0) {
      std::printf("workspace store, %d samples of %llu MiB (store in %s)\n", n,
                  static_cast<unsigned long long>(mib), base.c_str());
      row("create", create, "mke2fs alone", mkfs);
      row("open (mounts)", first_open, "tmpfs mount", tmpfs_mount);
      row("open (already mounted)", shared_open, "tmpfs mount", tmpfs_mount);
      row("list (1 mounted)", list, "tmpfs mount", tmpfs_mount);
      row("remove (unmount, unlink)", remove, "tmpfs umount", tmpfs_umount);
    }
  }
  std::filesystem::remove_all(base);
  return rc;
}
