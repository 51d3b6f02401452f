/* notify_probe: a small native program that castellan runs in a sandbox
 * (command mode) to exercise the system calls the supervisor decides.
 *
 *   notify_probe write PATH            open PATH for writing; print "ok" or the
 *                                      errno name, then "after" (the process
 *                                      survives a denial)
 *   notify_probe exec PATH             execv PATH; print the errno name, "after"
 *   notify_probe race ALLOWED DENIED N one thread flips a shared path buffer
 *                                      between ALLOWED and DENIED while another
 *                                      opens it for writing N times; exits 1
 *                                      and prints "RACE LOST" if an open ever
 *                                      reached DENIED's inode
 *   notify_probe bench PATH N          N open(O_WRONLY)/close pairs on PATH;
 *                                      prints "p50_ns P p99_ns Q"
 *
 * Exit 0 on a normal run, 1 for a failed check, 2 for bad usage. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

static const char* errno_name(int e) {
  switch (e) {
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case ENOENT: return "ENOENT";
    case EROFS: return "EROFS";
    case ENOSYS: return "ENOSYS";
    default: return strerror(e);
  }
}

/* Creates the parent directory of `path` (mkdir is not a decided call). */
static void make_parent(const char* path) {
  char dir[256];
  snprintf(dir, sizeof dir, "%s", path);
  char* slash = strrchr(dir, '/');
  if (slash != NULL && slash != dir) {
    *slash = '\0';
    (void)mkdir(dir, 0755);
  }
}

static int do_write(const char* path) {
  make_parent(path);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    printf("%s\n", errno_name(errno));
  } else {
    printf("ok\n");
    close(fd);
  }
  printf("after\n");
  return 0;
}

static int do_exec(const char* path) {
  char* const argv[] = {(char*)path, "-c", "echo escaped", NULL};
  execv(path, argv);
  printf("%s\n", errno_name(errno));
  printf("after\n");
  return 0;
}

/* -- race ---------------------------------------------------------------- */

static char shared_path[256];
static atomic_int stop_flipping;
static const char* race_allowed;
static const char* race_denied;

static void* flipper(void* arg) {
  (void)arg;
  size_t la = strlen(race_allowed) + 1, ld = strlen(race_denied) + 1;
  while (!atomic_load_explicit(&stop_flipping, memory_order_relaxed)) {
    memcpy(shared_path, race_allowed, la);
    memcpy(shared_path, race_denied, ld);
  }
  return NULL;
}

static int do_race(const char* allowed, const char* denied, long tries) {
  struct stat ds;
  make_parent(denied);
  if (stat(denied, &ds) != 0) {
    /* The denied file must exist for a successful open to be possible:
     * mknod creates it without an open the policy would refuse. */
    if (mknod(denied, S_IFREG | 0644, 0) != 0 || stat(denied, &ds) != 0) {
      printf("cannot create %s: %s\n", denied, strerror(errno));
      return 1;
    }
  }
  int afd = open(allowed, O_WRONLY | O_CREAT, 0644);
  if (afd < 0) {
    printf("cannot create %s: %s\n", allowed, strerror(errno));
    return 1;
  }
  close(afd);
  race_allowed = allowed;
  race_denied = denied;
  strcpy(shared_path, allowed);
  pthread_t t;
  if (pthread_create(&t, NULL, flipper, NULL) != 0) {
    printf("pthread_create failed\n");
    return 1;
  }
  long opened = 0, refused = 0, other = 0, lost = 0;
  for (long i = 0; i < tries; ++i) {
    int fd = open(shared_path, O_WRONLY);
    if (fd < 0) {
      if (errno == EACCES)
        ++refused;
      else
        ++other;
      continue;
    }
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_ino == ds.st_ino && st.st_dev == ds.st_dev)
      ++lost;
    ++opened;
    close(fd);
  }
  atomic_store(&stop_flipping, 1);
  pthread_join(t, NULL);
  printf("tries %ld opened %ld refused %ld other %ld denied_opened %ld\n", tries, opened, refused,
         other, lost);
  if (lost != 0) {
    printf("RACE LOST\n");
    return 1;
  }
  return 0;
}

/* -- bench --------------------------------------------------------------- */

static int cmp_long(const void* a, const void* b) {
  long x = *(const long*)a, y = *(const long*)b;
  return (x > y) - (x < y);
}

static int do_bench(const char* path, long n) {
  long* ns = malloc(sizeof(long) * (size_t)n);
  if (ns == NULL)
    return 1;
  int fd = open(path, O_WRONLY | O_CREAT, 0644);
  if (fd >= 0)
    close(fd);
  for (long i = 0; i < n; ++i) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    fd = open(path, O_WRONLY);
    if (fd < 0) {
      printf("open %s: %s\n", path, strerror(errno));
      return 1;
    }
    close(fd);
    clock_gettime(CLOCK_MONOTONIC, &b);
    ns[i] = (b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec);
  }
  qsort(ns, (size_t)n, sizeof(long), cmp_long);
  printf("p50_ns %ld p99_ns %ld\n", ns[n / 2], ns[(n * 99) / 100]);
  free(ns);
  return 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IONBF, 0);
  if (argc == 3 && strcmp(argv[1], "write") == 0)
    return do_write(argv[2]);
  if (argc == 3 && strcmp(argv[1], "exec") == 0)
    return do_exec(argv[2]);
  if (argc == 5 && strcmp(argv[1], "race") == 0)
    return do_race(argv[2], argv[3], atol(argv[4]));
  if (argc == 4 && strcmp(argv[1], "bench") == 0)
    return do_bench(argv[2], atol(argv[3]));
  fprintf(stderr, "usage: notify_probe write PATH | exec PATH | race ALLOWED DENIED N | bench PATH N\n");
  return 2;
}
