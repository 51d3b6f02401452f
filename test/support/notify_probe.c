/* notify_probe: a small native program that castellan runs in a sandbox
 * (command mode) to exercise the system calls the supervisor decides.
 *
 *   notify_probe write PATH            open PATH for writing; print "ok" or the
 *                                      errno name, then "after" (the process
 *                                      survives a denial)
 *   notify_probe exec PATH             execv PATH; print the errno name, "after"
 *   notify_probe ops STEP...           run each STEP ("op:arg:arg", see
 *                                      run_step) and print "STEP: ok", the errno
 *                                      name, or what the step reports; then
 *                                      "after"
 *   notify_probe race ALLOWED DENIED N one thread flips a shared path buffer
 *                                      between ALLOWED and DENIED while another
 *                                      opens it for writing N times; exits 1
 *                                      and prints "RACE LOST" if an open ever
 *                                      reached DENIED's inode
 *   notify_probe race-unlink ALLOWED DENIED N
 *                                      the same with unlink (ALLOWED is made
 *                                      again after each success): DENIED must
 *                                      still be there, the same inode
 *   notify_probe race-rename SOURCE ALLOWED DENIED N
 *                                      the same with rename(SOURCE, flipped):
 *                                      DENIED (an existing file the policy
 *                                      keeps) must never be replaced
 *   notify_probe bench PATH N          N open(O_WRONLY)/close pairs on PATH;
 *                                      prints "p50_ns P p99_ns Q"
 *   notify_probe bench-mkdir PATH N    N mkdir(PATH), each followed by an
 *                                      untimed rmdir; the same figures
 *   notify_probe bench-connect PORT N  N connect() of a UDP socket to
 *                                      127.0.0.1:PORT; the same figures
 *
 * Exit 0 on a normal run, 1 for a failed check, 2 for bad usage. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

static const char* errno_name(int e) {
  switch (e) {
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case ENOENT: return "ENOENT";
    case EROFS: return "EROFS";
    case ENOSYS: return "ENOSYS";
    case EEXIST: return "EEXIST";
    case EISDIR: return "EISDIR";
    case ENOTDIR: return "ENOTDIR";
    case ENOTEMPTY: return "ENOTEMPTY";
    case EXDEV: return "EXDEV";
    case EINVAL: return "EINVAL";
    case EBUSY: return "EBUSY";
    case EADDRINUSE: return "EADDRINUSE";
    case ECONNREFUSED: return "ECONNREFUSED";
    case ENETUNREACH: return "ENETUNREACH";
    case EAGAIN: return "EAGAIN";
    case EBADF: return "EBADF";
    default: return strerror(e);
  }
}

/* Creates the parent directory of `path`. */
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

/* -- ops ----------------------------------------------------------------- */

static int inet_address(const char* addr, const char* port, struct sockaddr_in* out) {
  memset(out, 0, sizeof *out);
  out->sin_family = AF_INET;
  out->sin_port = htons((uint16_t)atoi(port));
  return inet_pton(AF_INET, addr, &out->sin_addr) == 1 ? 0 : -1;
}

static socklen_t unix_address(const char* path, struct sockaddr_un* out) {
  memset(out, 0, sizeof *out);
  out->sun_family = AF_UNIX;
  snprintf(out->sun_path, sizeof out->sun_path, "%s", path);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(out->sun_path) + 1);
}

/* Sockets a step leaves open for later steps (a listener, a bound server). */
static int kept[16];
static int kept_count;

static void keep(int fd) {
  if (kept_count < 16)
    kept[kept_count++] = fd;
}

/* Runs one step; prints its outcome. `a` and `b` are its arguments. */
static void run_step(const char* step, const char* op, const char* a, const char* b) {
  int rc = -1;
  char report[256] = "";
  struct stat st;
  if (strcmp(op, "unlink") == 0) {
    rc = unlink(a);
  } else if (strcmp(op, "rmdir") == 0) {
    rc = rmdir(a);
  } else if (strcmp(op, "mkdir") == 0) {
    rc = mkdir(a, b ? (mode_t)strtoul(b, NULL, 8) : 0755);
  } else if (strcmp(op, "rename") == 0) {
    rc = rename(a, b);
  } else if (strcmp(op, "rename-noreplace") == 0) {
    rc = (int)syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b, RENAME_NOREPLACE);
  } else if (strcmp(op, "exchange") == 0) {
    rc = (int)syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE);
  } else if (strcmp(op, "link") == 0) {
    rc = link(a, b);
  } else if (strcmp(op, "symlink") == 0) {
    rc = symlink(a, b);
  } else if (strcmp(op, "truncate") == 0) {
    rc = truncate(a, b ? atol(b) : 0);
  } else if (strcmp(op, "mknod") == 0) {
    rc = mknod(a, S_IFREG | 0644, 0);
  } else if (strcmp(op, "mkfifo") == 0) {
    rc = mkfifo(a, 0644);
  } else if (strcmp(op, "mknod-chr") == 0) {
    rc = mknod(a, S_IFCHR | 0600, makedev(1, 3));
  } else if (strcmp(op, "umask") == 0) {
    umask((mode_t)strtoul(a, NULL, 8));
    rc = 0;
  } else if (strcmp(op, "status-umask") == 0) {
    /* the umask as /proc says it, without calling umask(2) */
    FILE* f = fopen("/proc/self/status", "r");
    char line[256];
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
      if (strncmp(line, "Umask:", 6) == 0) {
        snprintf(report, sizeof report, "umask=%lo", strtoul(line + 6, NULL, 8));
        rc = 0;
      }
    if (f != NULL)
      fclose(f);
  } else if (strcmp(op, "write") == 0) {
    int fd = open(a, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      rc = write(fd, b ? b : "", b ? strlen(b) : 0) < 0 ? -1 : 0;
      close(fd);
    }
  } else if (strcmp(op, "read") == 0) {
    int fd = open(a, O_RDONLY);
    if (fd >= 0) {
      char buf[128] = "";
      ssize_t n = read(fd, buf, sizeof buf - 1);
      close(fd);
      if (n >= 0) {
        buf[n] = '\0';
        snprintf(report, sizeof report, "'%s'", buf);
        rc = 0;
      }
    }
  } else if (strcmp(op, "stat") == 0 || strcmp(op, "lstat") == 0) {
    rc = (op[0] == 'l' ? lstat : stat)(a, &st);
    if (rc == 0)
      snprintf(report, sizeof report, "uid=%u type=%s mode=%o size=%lld", (unsigned)st.st_uid,
               S_ISDIR(st.st_mode)    ? "dir"
               : S_ISLNK(st.st_mode)  ? "link"
               : S_ISFIFO(st.st_mode) ? "fifo"
               : S_ISSOCK(st.st_mode) ? "sock"
               : S_ISREG(st.st_mode)  ? "file"
                                      : "other",
               (unsigned)(st.st_mode & 07777), (long long)st.st_size);
  } else if (strcmp(op, "readlink") == 0) {
    char buf[200];
    ssize_t n = readlink(a, buf, sizeof buf - 1);
    if (n >= 0) {
      buf[n] = '\0';
      snprintf(report, sizeof report, "'%s'", buf);
      rc = 0;
    }
  } else if (strcmp(op, "unlinkat") == 0) {
    /* relative to a directory fd: "unlinkat:DIR:NAME" */
    int dir = open(a, O_RDONLY | O_DIRECTORY);
    if (dir >= 0) {
      rc = unlinkat(dir, b, 0);
      int e = errno;
      close(dir);
      errno = e;
    }
  } else if (strcmp(op, "tcp-connect") == 0 || strcmp(op, "udp-connect") == 0 ||
             strcmp(op, "udp-sendto") == 0 || strcmp(op, "udp-bind") == 0) {
    const char* colon = strrchr(a, ',');
    char host[64];
    snprintf(host, sizeof host, "%.*s", colon ? (int)(colon - a) : (int)strlen(a), a);
    struct sockaddr_in in;
    if (colon == NULL || inet_address(host, colon + 1, &in) != 0) {
      printf("%s: bad address\n", step);
      return;
    }
    int s = socket(AF_INET, op[0] == 't' ? SOCK_STREAM : SOCK_DGRAM, 0);
    if (s < 0) {
      printf("%s: socket %s\n", step, errno_name(errno));
      return;
    }
    if (strcmp(op, "udp-sendto") == 0)
      rc = sendto(s, "x", 1, 0, (struct sockaddr*)&in, sizeof in) == 1 ? 0 : -1;
    else if (strcmp(op, "udp-bind") == 0)
      rc = bind(s, (struct sockaddr*)&in, sizeof in);
    else
      rc = connect(s, (struct sockaddr*)&in, sizeof in);
    int e = errno;
    close(s);
    errno = e;
  } else if (strcmp(op, "udp-pair") == 0) {
    /* a server on 127.0.0.1:PORT receives what a client sends it */
    struct sockaddr_in in;
    inet_address("127.0.0.1", a, &in);
    int srv = socket(AF_INET, SOCK_DGRAM, 0);
    int cli = socket(AF_INET, SOCK_DGRAM, 0);
    if (bind(srv, (struct sockaddr*)&in, sizeof in) == 0 &&
        sendto(cli, "ping", 4, 0, (struct sockaddr*)&in, sizeof in) == 4) {
      char buf[8] = "";
      ssize_t n = recv(srv, buf, sizeof buf - 1, MSG_DONTWAIT);
      if (n > 0) {
        snprintf(report, sizeof report, "received '%s'", buf);
        rc = 0;
      } else {
        errno = EAGAIN;
      }
    }
    int e = errno;
    close(srv);
    close(cli);
    errno = e;
  } else if (strcmp(op, "unix-listen") == 0) {
    struct sockaddr_un un;
    socklen_t len = unix_address(a, &un);
    /* non-blocking: unix-connect polls every kept listener with accept */
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    rc = bind(s, (struct sockaddr*)&un, len);
    if (rc == 0)
      rc = listen(s, 4);
    if (rc == 0) {
      keep(s);
      struct sockaddr_un name;
      socklen_t name_len = sizeof name;
      getsockname(s, (struct sockaddr*)&name, &name_len);
      snprintf(report, sizeof report, "bound '%s'", name.sun_path);
    } else {
      int e = errno;
      close(s);
      errno = e;
    }
  } else if (strcmp(op, "unix-dgram-bind") == 0) {
    struct sockaddr_un un;
    socklen_t len = unix_address(a, &un);
    int s = socket(AF_UNIX, SOCK_DGRAM, 0);
    rc = bind(s, (struct sockaddr*)&un, len);
    if (rc == 0) {
      keep(s);
    } else {
      int e = errno;
      close(s);
      errno = e;
    }
  } else if (strcmp(op, "unix-connect") == 0) {
    /* connect, then the listener kept by unix-listen accepts and reads */
    struct sockaddr_un un;
    socklen_t len = unix_address(a, &un);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    rc = connect(s, (struct sockaddr*)&un, len);
    if (rc == 0) {
      rc = write(s, "hello", 5) == 5 ? 0 : -1;
      for (int i = 0; rc == 0 && i < kept_count; ++i) {
        int peer = accept4(kept[i], NULL, NULL, SOCK_NONBLOCK);
        if (peer < 0)
          continue;
        char buf[8] = "";
        ssize_t n = read(peer, buf, sizeof buf - 1);
        struct ucred cred;
        socklen_t cl = sizeof cred;
        getsockopt(peer, SOL_SOCKET, SO_PEERCRED, &cred, &cl);
        snprintf(report, sizeof report, "accepted '%s' peer uid=%u", n > 0 ? buf : "",
                 (unsigned)cred.uid);
        close(peer);
        break;
      }
    }
    int e = errno;
    close(s);
    errno = e;
  } else if (strcmp(op, "unix-sendfd") == 0) {
    /* a pipe's write end to PATH (SCM_RIGHTS); the kept server receives it,
     * writes through it, and the pipe shows what arrived */
    struct sockaddr_un un;
    socklen_t len = unix_address(a, &un);
    int s = socket(AF_UNIX, SOCK_DGRAM, 0);
    int p[2];
    if (pipe(p) == 0) {
      char control[CMSG_SPACE(sizeof(int))];
      memset(control, 0, sizeof control);
      struct iovec iov = {"f", 1};
      struct msghdr h = {0};
      h.msg_name = &un;
      h.msg_namelen = len;
      h.msg_iov = &iov;
      h.msg_iovlen = 1;
      h.msg_control = control;
      h.msg_controllen = sizeof control;
      struct cmsghdr* cm = CMSG_FIRSTHDR(&h);
      cm->cmsg_level = SOL_SOCKET;
      cm->cmsg_type = SCM_RIGHTS;
      cm->cmsg_len = CMSG_LEN(sizeof(int));
      memcpy(CMSG_DATA(cm), &p[1], sizeof(int));
      rc = sendmsg(s, &h, 0) == 1 ? 0 : -1;
      int e = errno;
      close(p[1]);
      for (int i = 0; rc == 0 && i < kept_count; ++i) {
        char in[CMSG_SPACE(sizeof(int))];
        char byte;
        struct iovec riov = {&byte, 1};
        struct msghdr r = {0};
        r.msg_iov = &riov;
        r.msg_iovlen = 1;
        r.msg_control = in;
        r.msg_controllen = sizeof in;
        if (recvmsg(kept[i], &r, MSG_DONTWAIT) != 1)
          continue;
        struct cmsghdr* got = CMSG_FIRSTHDR(&r);
        int fd = -1;
        if (got != NULL && got->cmsg_type == SCM_RIGHTS)
          memcpy(&fd, CMSG_DATA(got), sizeof fd);
        if (fd >= 0 && write(fd, "via", 3) == 3) {
          close(fd);
          char buf[8] = "";
          ssize_t n = read(p[0], buf, sizeof buf - 1);
          snprintf(report, sizeof report, "passed fd wrote '%s'", n > 0 ? buf : "");
        }
        break;
      }
      close(p[0]);
      errno = e;
    }
    int e = errno;
    close(s);
    errno = e;
  } else if (strcmp(op, "unix-sendto") == 0 || strcmp(op, "unix-sendmsg") == 0) {
    /* a datagram to PATH; a server kept by unix-dgram-bind reads it */
    struct sockaddr_un un;
    socklen_t len = unix_address(a, &un);
    int s = socket(AF_UNIX, SOCK_DGRAM, 0);
    if (strcmp(op, "unix-sendto") == 0) {
      rc = sendto(s, "dgram", 5, 0, (struct sockaddr*)&un, len) == 5 ? 0 : -1;
    } else {
      struct iovec iov = {"dgram", 5};
      struct msghdr h = {0};
      h.msg_name = &un;
      h.msg_namelen = len;
      h.msg_iov = &iov;
      h.msg_iovlen = 1;
      rc = sendmsg(s, &h, 0) == 5 ? 0 : -1;
    }
    int e = errno;
    for (int i = 0; rc == 0 && i < kept_count; ++i) {
      char buf[8] = "";
      ssize_t n = recv(kept[i], buf, sizeof buf - 1, MSG_DONTWAIT);
      if (n > 0) {
        snprintf(report, sizeof report, "received '%s'", buf);
        break;
      }
    }
    close(s);
    errno = e;
  } else {
    printf("%s: unknown step\n", step);
    return;
  }
  if (rc == 0)
    printf("%s: %s\n", step, report[0] ? report : "ok");
  else
    printf("%s: %s\n", step, errno_name(errno));
}

static int do_ops(int argc, char** argv) {
  for (int i = 0; i < argc; ++i) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", argv[i]);
    char* op = buf;
    char* a = strchr(op, ':');
    char* b = NULL;
    if (a != NULL) {
      *a++ = '\0';
      b = strchr(a, ':');
      if (b != NULL)
        *b++ = '\0';
    }
    run_step(argv[i], op, a, b);
  }
  printf("after\n");
  return 0;
}

/* -- races --------------------------------------------------------------- */

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

static int start_flipper(pthread_t* t, const char* allowed, const char* denied) {
  race_allowed = allowed;
  race_denied = denied;
  strcpy(shared_path, allowed);
  if (pthread_create(t, NULL, flipper, NULL) != 0) {
    printf("pthread_create failed\n");
    return -1;
  }
  return 0;
}

static void stop_flipper(pthread_t t) {
  atomic_store(&stop_flipping, 1);
  pthread_join(t, NULL);
}

/* Creates `path` as an empty regular file (mknod: no open involved). */
static int make_file(const char* path, struct stat* st) {
  make_parent(path);
  if (stat(path, st) == 0)
    return 0;
  if (mknod(path, S_IFREG | 0644, 0) != 0 || stat(path, st) != 0) {
    printf("cannot create %s: %s\n", path, strerror(errno));
    return -1;
  }
  return 0;
}

static int do_race(const char* allowed, const char* denied, long tries) {
  struct stat ds, as;
  if (make_file(denied, &ds) != 0 || make_file(allowed, &as) != 0)
    return 1;
  pthread_t t;
  if (start_flipper(&t, allowed, denied) != 0)
    return 1;
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
  stop_flipper(t);
  printf("tries %ld opened %ld refused %ld other %ld denied_opened %ld\n", tries, opened, refused,
         other, lost);
  if (lost != 0) {
    printf("RACE LOST\n");
    return 1;
  }
  return 0;
}

static int do_race_unlink(const char* allowed, const char* denied, long tries) {
  struct stat ds, as;
  if (make_file(denied, &ds) != 0 || make_file(allowed, &as) != 0)
    return 1;
  pthread_t t;
  if (start_flipper(&t, allowed, denied) != 0)
    return 1;
  long removed = 0, refused = 0, other = 0;
  for (long i = 0; i < tries; ++i) {
    if (unlink(shared_path) == 0) {
      ++removed;
      if (make_file(allowed, &as) != 0)
        break;
    } else if (errno == EACCES) {
      ++refused;
    } else {
      ++other;
    }
  }
  stop_flipper(t);
  struct stat now;
  const int touched =
    stat(denied, &now) != 0 || now.st_ino != ds.st_ino || now.st_dev != ds.st_dev;
  printf("tries %ld removed %ld refused %ld other %ld denied_touched %d\n", tries, removed,
         refused, other, touched);
  if (touched) {
    printf("RACE LOST\n");
    return 1;
  }
  return 0;
}

static int do_race_rename(const char* source, const char* allowed, const char* denied,
                          long tries) {
  struct stat ds, ss;
  if (make_file(denied, &ds) != 0)
    return 1;
  pthread_t t;
  if (start_flipper(&t, allowed, denied) != 0)
    return 1;
  long renamed = 0, refused = 0, other = 0;
  for (long i = 0; i < tries; ++i) {
    if (make_file(source, &ss) != 0)
      break;
    if (rename(source, shared_path) == 0)
      ++renamed;
    else if (errno == EACCES)
      ++refused;
    else
      ++other;
  }
  stop_flipper(t);
  struct stat now;
  const int touched =
    stat(denied, &now) != 0 || now.st_ino != ds.st_ino || now.st_dev != ds.st_dev;
  printf("tries %ld renamed %ld refused %ld other %ld denied_touched %d\n", tries, renamed,
         refused, other, touched);
  if (touched) {
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

static long elapsed_ns(const struct timespec* a, const struct timespec* b) {
  return (b->tv_sec - a->tv_sec) * 1000000000L + (b->tv_nsec - a->tv_nsec);
}

static void print_percentiles(long* ns, long n) {
  qsort(ns, (size_t)n, sizeof(long), cmp_long);
  printf("p50_ns %ld p99_ns %ld\n", ns[n / 2], ns[(n * 99) / 100]);
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
    ns[i] = elapsed_ns(&a, &b);
  }
  print_percentiles(ns, n);
  free(ns);
  return 0;
}

static int do_bench_mkdir(const char* path, long n) {
  long* ns = malloc(sizeof(long) * (size_t)n);
  if (ns == NULL)
    return 1;
  (void)rmdir(path);
  for (long i = 0; i < n; ++i) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    const int rc = mkdir(path, 0755);
    clock_gettime(CLOCK_MONOTONIC, &b);
    if (rc != 0 || rmdir(path) != 0) {
      printf("mkdir/rmdir %s: %s\n", path, strerror(errno));
      return 1;
    }
    ns[i] = elapsed_ns(&a, &b);
  }
  print_percentiles(ns, n);
  free(ns);
  return 0;
}

static int do_bench_connect(const char* port, long n) {
  long* ns = malloc(sizeof(long) * (size_t)n);
  if (ns == NULL)
    return 1;
  struct sockaddr_in in;
  inet_address("127.0.0.1", port, &in);
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  for (long i = 0; i < n; ++i) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    const int rc = connect(s, (struct sockaddr*)&in, sizeof in);
    clock_gettime(CLOCK_MONOTONIC, &b);
    if (rc != 0) {
      printf("connect 127.0.0.1:%s: %s\n", port, strerror(errno));
      return 1;
    }
    ns[i] = elapsed_ns(&a, &b);
  }
  close(s);
  print_percentiles(ns, n);
  free(ns);
  return 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IONBF, 0);
  if (argc == 3 && strcmp(argv[1], "write") == 0)
    return do_write(argv[2]);
  if (argc == 3 && strcmp(argv[1], "exec") == 0)
    return do_exec(argv[2]);
  if (argc >= 2 && strcmp(argv[1], "ops") == 0)
    return do_ops(argc - 2, argv + 2);
  if (argc == 5 && strcmp(argv[1], "race") == 0)
    return do_race(argv[2], argv[3], atol(argv[4]));
  if (argc == 5 && strcmp(argv[1], "race-unlink") == 0)
    return do_race_unlink(argv[2], argv[3], atol(argv[4]));
  if (argc == 6 && strcmp(argv[1], "race-rename") == 0)
    return do_race_rename(argv[2], argv[3], argv[4], atol(argv[5]));
  if (argc == 4 && strcmp(argv[1], "bench") == 0)
    return do_bench(argv[2], atol(argv[3]));
  if (argc == 4 && strcmp(argv[1], "bench-mkdir") == 0)
    return do_bench_mkdir(argv[2], atol(argv[3]));
  if (argc == 4 && strcmp(argv[1], "bench-connect") == 0)
    return do_bench_connect(argv[2], atol(argv[3]));
  fprintf(stderr, "usage: notify_probe write PATH | exec PATH | ops STEP... | race ALLOWED DENIED N"
                  " | race-unlink ALLOWED DENIED N | race-rename SOURCE ALLOWED DENIED N"
                  " | bench PATH N | bench-mkdir PATH N | bench-connect PORT N\n");
  return 2;
}
