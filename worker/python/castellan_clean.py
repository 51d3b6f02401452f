"""castellan_clean: puts back what a fork-mode exec could leave for the next.

A fork-mode worker runs one exec at a time, each in a process forked from the
zygote. What that process changes in its own memory ends with it; what it
changes in the worker outlives it unless somebody puts it back. Once the
exec's process and every process it started are gone (the zygote is their
subreaper and has no child left), the zygote calls `Cleaner.clean()`, which:

- empties every writable tmpfs of the sandbox (/tmp, /dev/shm, and any the
  policy adds; read from /proc/self/mountinfo once): entries are removed
  through directory fds, never following a symlink, a directory the code
  made unreadable (mode 000) is given back its owner's rights first, and no
  directory on another device (a bind below /tmp) is entered. The mount's
  own directory gets back its mode and loses extended attributes;
- removes every System V shared memory segment, semaphore set and message
  queue of the worker's IPC namespace (the code runs as the namespace's only
  user, so it can remove them all);
- drains the control socket (denial records the supervisor wrote for the
  earlier exec) into a buffer it then zeroes, and gives it back its buffer
  sizes;
- clears the file status flags (O_NONBLOCK, O_ASYNC) the code may have set
  on the fd 1/2 pipes, whose open file descriptions every exec shares, and
  gives them back their size;
- releases the locks the code may have taken on the open file descriptions
  it shares with the zygote (fd 0, the fd 1/2 pipes, the control socket):
  flock and open-file-description locks belong to the description, not to
  the process, so they would outlive the exec and carry its data (a lock's
  byte range) to the next;
- detaches a socket filter the code attached to the control socket (it
  would hide the next exec's denial records); a locked one cannot be
  detached and retires the worker;
- puts back, as they were when the zygote started, everything else an exec
  can write on what it shares and a later exec can read: the owner and
  signal of fd 0/1/2 and the control socket, fd 0's status flags, the mode,
  times and write hint of the fd 1/2 pipe inodes, the control socket's
  socket-level options, and the times, inode flags and write hint of each
  writable tmpfs's own directory. What it cannot put back retires the
  worker.

Without castellan's sandbox (isolation none) there is no private /tmp or
IPC namespace to put back, and only the shared fds are.

Anything it cannot put back (an entry it cannot remove, more than
MAX_ENTRIES entries or directories deeper than MAX_DEPTH, an IPC object that
stays, a control socket that was shut down) is returned as a reason: the
worker then serves no further exec and the pool replaces it (fail closed).
POSIX message queues need no cleaning here: mq_open is refused in the
sandbox (test/escapes/probes/fork_mqueue.py checks that).
"""

import ctypes
import errno
import fcntl
import os
import stat
import struct

#: Entries removed per exec before the cleaner gives up and the worker is
#: replaced instead (a fresh worker is cheaper than a long scrub).
MAX_ENTRIES = 10000
#: Directory depth below a mount's root the cleaner descends to.
MAX_DEPTH = 64

# fcntl(2).
_F_SETFL = 4
_F_SETPIPE_SZ = 1031
_F_GETPIPE_SZ = 1032
_PIPE_SIZE = 65536

# socket(7).
_SOL_SOCKET = 1
_SO_SNDBUF = 7
_SO_RCVBUF = 8
_SO_DETACH_FILTER = 27
_SO_LOCK_FILTER = 44
#: Socket-level options an exec can set on the control socket (socket(7),
#: asm-generic/socket.h): each is put back to what it was at the start.
#: Read-only ones (SO_TYPE, SO_PEERCRED, SO_MEMINFO…) are not listed, and
#: neither is SO_PEERPIDFD, whose read makes a new descriptor.
_SOCKET_OPTIONS = (1, 2, 5, 6, 9, 10, 11, 12, 13, 15, 16, 18, 20, 21, 29, 34, 35, 36, 37, 40,
                   41, 42, 43, 45, 46, 49, 60, 61, 69, 70, 75, 76)

# fcntl(2) and ioctl_iflags(2).
_F_SETOWN, _F_GETOWN_EX, _F_SETOWN_EX = 8, 16, 15
_F_SETSIG, _F_GETSIG = 10, 11
_F_GET_RW_HINT, _F_SET_RW_HINT = 1035, 1036
_FS_IOC_GETFLAGS, _FS_IOC_SETFLAGS = 0x80086601, 0x40086602

# System V IPC (include/uapi/linux/{ipc,shm,sem,msg}.h).
_IPC_RMID = 0
_MSG_INFO, _MSG_STAT_ANY = 12, 13
_SHM_INFO, _SHM_STAT_ANY = 14, 15
_SEM_INFO, _SEM_STAT_ANY = 19, 20


class _Unclean(Exception):
    """What could not be put back (its text is the reason)."""


def _unescape(field):
    """A path field of /proc/self/mountinfo (spaces and such are \\ooo)."""
    out = []
    i = 0
    while i < len(field):
        if field[i] == "\\" and i + 4 <= len(field) and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def _mounts():
    """(mount point, file system type, per-mount options, source) of this
    process's mount namespace."""
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            fields = line.split()
            try:
                sep = fields.index("-")
            except ValueError:
                continue
            source = fields[sep + 2] if len(fields) > sep + 2 else ""
            yield _unescape(fields[4]), fields[sep + 1], fields[5].split(","), source


def _inode_flags(fd):
    buf = bytearray(8)
    try:
        fcntl.ioctl(fd, _FS_IOC_GETFLAGS, buf)
    except OSError as e:
        if e.errno in (errno.ENOTTY, errno.EOPNOTSUPP, errno.EINVAL):
            return None  # the file system keeps none
        raise
    return bytes(buf)


def _write_hint(fd):
    return fcntl.fcntl(fd, _F_GET_RW_HINT, bytes(8))


def _put_back_inode(fd, what, flags, hint, times, mode=None):
    """The inode flags, write hint, mode and times of `fd` as they were."""
    if flags is not None and _inode_flags(fd) != flags:
        fcntl.ioctl(fd, _FS_IOC_SETFLAGS, bytearray(flags))
        if _inode_flags(fd) != flags:
            raise _Unclean(f"cannot give {what} its inode flags back")
    if _write_hint(fd) != hint:
        fcntl.fcntl(fd, _F_SET_RW_HINT, hint)
    st = os.fstat(fd)
    if mode is not None and stat.S_IMODE(st.st_mode) != mode:
        os.fchmod(fd, mode)
    if (st.st_atime_ns, st.st_mtime_ns) != times:
        os.utime(fd, ns=times)


class _Root:
    """One writable tmpfs: its path, device, mode, and the mount points
    below it (kept, with the directories that lead to them)."""

    def __init__(self, path, below):
        self.path = path
        st = os.stat(path, follow_symlinks=False)
        self.dev = st.st_dev
        self.mode = stat.S_IMODE(st.st_mode)
        self.times = (st.st_atime_ns, st.st_mtime_ns)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            self.flags = _inode_flags(fd)
            self.hint = _write_hint(fd)
        finally:
            os.close(fd)
        self.keep = set()
        for mount in below:
            rel = mount[len(path):].strip("/")
            parts = rel.split("/")
            for i in range(1, len(parts) + 1):
                self.keep.add("/".join(parts[:i]))
        self.mounts = {m[len(path):].strip("/") for m in below}


class Cleaner:
    def __init__(self, control_fd=None, stdio=(1, 2)):
        libc = ctypes.CDLL(None, use_errno=True)
        self._shmctl = libc.shmctl
        self._semctl = libc.semctl
        self._msgctl = libc.msgctl
        self._ipc_buf = ctypes.create_string_buffer(256)
        self._control_fd = control_fd
        self._scratch = bytearray(65536)
        self._getsockopt = libc.getsockopt
        self._setsockopt = libc.setsockopt
        self._sockopt = ctypes.c_int(0)
        self._sockopt_len = ctypes.c_uint(ctypes.sizeof(ctypes.c_int))
        # The control socket's buffer sizes as the worker started, which an
        # exec could shrink (so that the supervisor's records for the next
        # exec no longer fit).
        self._control_buffers = {}
        if control_fd is not None:
            for option in (_SO_RCVBUF, _SO_SNDBUF):
                self._control_buffers[option] = self._socket_option(option)
        self._stdio = stdio
        # What the shared descriptions and the pipes' inodes were at the
        # start, before any exec.
        self._shared_fds = [0, *stdio] + ([control_fd] if control_fd is not None else [])
        self._owners = {fd: self._owner(fd) for fd in self._shared_fds}
        self._signals = {fd: fcntl.fcntl(fd, _F_GETSIG) for fd in self._shared_fds}
        self._stdin_flags = fcntl.fcntl(0, fcntl.F_GETFL)
        self._pipes = {}
        for fd in stdio:
            st = os.fstat(fd)
            self._pipes[fd] = (stat.S_IMODE(st.st_mode), (st.st_atime_ns, st.st_mtime_ns),
                               _write_hint(fd))
        self._control_options = {}
        if control_fd is not None:
            for option in _SOCKET_OPTIONS:
                value = self._raw_socket_option(option)
                if value is not None:
                    self._control_options[option] = value
        mounts = list(_mounts())
        points = [m[0] for m in mounts]
        self.roots = []
        # Only inside castellan's sandbox: its root is the tmpfs that
        # castellan-worker built (root_builder), in a mount and IPC namespace
        # of the worker's own. A worker without a sandbox (isolation none,
        # for development) shares the host's /tmp and IPC objects, which are
        # not the exec's to clean.
        self.sandboxed = any(path == "/" and fstype == "tmpfs" and source == "castellan-root"
                             for path, fstype, _, source in mounts)
        if not self.sandboxed:
            return
        for path, fstype, options, _ in mounts:
            if fstype != "tmpfs" or "rw" not in options or path == "/":
                continue
            below = [p for p in points if p != path and p.startswith(path.rstrip("/") + "/")]
            try:
                self.roots.append(_Root(path, below))
            except OSError:
                continue  # hidden under another mount: nothing reaches it

    def clean(self):
        """Puts everything back; None, or the reason it could not."""
        try:
            for root in self.roots:
                self._empty_root(root)
            if self.sandboxed:
                self._remove_ipc()
            self._drain_control()
            self._reset_stdio()
            self._release_locks()
            self._put_back_descriptions()
        except _Unclean as e:
            return str(e)
        except OSError as e:
            return f"cannot clean up after the exec: {e}"
        return None

    # --- writable file systems ------------------------------------------------------

    def _empty_root(self, root):
        fd = os.open(root.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            st = os.fstat(fd)
            if st.st_dev != root.dev:
                raise _Unclean(f"{root.path} is no longer the sandbox's tmpfs")
            if stat.S_IMODE(st.st_mode) != root.mode:
                os.fchmod(fd, root.mode)
            for name in os.listxattr(fd):
                os.removexattr(fd, name)
            budget = [MAX_ENTRIES]
            self._empty_dir(fd, root, "", 0, budget)
            # Last: emptying it changed its times.
            _put_back_inode(fd, root.path, root.flags, root.hint, root.times)
        finally:
            os.close(fd)

    def _empty_dir(self, fd, root, rel, depth, budget):
        """Removes what the directory `fd` (at `rel` below the root) holds,
        but the mount points below the root and the way to them."""
        with os.scandir(fd) as entries:
            names = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
        for name, is_dir in names:
            budget[0] -= 1
            if budget[0] < 0:
                raise _Unclean(f"more than {MAX_ENTRIES} entries left in {root.path}")
            path = name if not rel else rel + "/" + name
            if path in root.mounts:
                continue
            if not is_dir:
                os.unlink(name, dir_fd=fd)
                continue
            if depth >= MAX_DEPTH:
                raise _Unclean(f"directories deeper than {MAX_DEPTH} in {root.path}")
            flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
            try:
                sub = os.open(name, flags, dir_fd=fd)
            except PermissionError:
                # Made unreadable by the code (its owner's, as is everything
                # here): give it back its owner's rights. It is a directory
                # (no process of the exec is left to swap it).
                os.chmod(name, 0o700, dir_fd=fd, follow_symlinks=False)
                sub = os.open(name, flags, dir_fd=fd)
            try:
                st = os.fstat(sub)
                if st.st_dev != root.dev:
                    if path in root.keep:
                        continue
                    raise _Unclean(f"{root.path}/{path} is on another file system")
                if stat.S_IMODE(st.st_mode) & 0o700 != 0o700:
                    os.fchmod(sub, 0o700)
                self._empty_dir(sub, root, path, depth + 1, budget)
            finally:
                os.close(sub)
            if path not in root.keep:
                os.rmdir(name, dir_fd=fd)

    # --- System V IPC -------------------------------------------------------------------

    def _remove_ipc(self):
        buf = self._ipc_buf
        for kind, info, stat_any, used_at, ctl in (
                ("shared memory segment", _SHM_INFO, _SHM_STAT_ANY, 0,
                 lambda i, cmd: self._shmctl(i, cmd, buf)),
                ("semaphore set", _SEM_INFO, _SEM_STAT_ANY, 28,
                 lambda i, cmd: self._semctl(i, 0, cmd, buf)),
                ("message queue", _MSG_INFO, _MSG_STAT_ANY, 0,
                 lambda i, cmd: self._msgctl(i, cmd, buf))):
            highest = ctl(0, info)
            if highest < 0:
                raise _Unclean(f"cannot count the worker's System V {kind}s: "
                               f"{os.strerror(ctypes.get_errno())}")
            if ctypes.c_int.from_buffer(buf, used_at).value == 0:
                continue
            for index in range(highest + 1):
                ident = ctl(index, stat_any)
                if ident >= 0 and ctl(ident, _IPC_RMID) != 0:
                    raise _Unclean(f"cannot remove System V {kind} {ident}: "
                                   f"{os.strerror(ctypes.get_errno())}")
            ctl(0, info)
            if ctypes.c_int.from_buffer(buf, used_at).value != 0:
                raise _Unclean(f"a System V {kind} of the exec is left")

    # --- shared fds ---------------------------------------------------------------------

    def _socket_option(self, option):
        self._sockopt_len.value = ctypes.sizeof(ctypes.c_int)
        if self._getsockopt(self._control_fd, _SOL_SOCKET, option, ctypes.byref(self._sockopt),
                            ctypes.byref(self._sockopt_len)) != 0:
            raise _Unclean(f"getsockopt on the control socket: "
                           f"{os.strerror(ctypes.get_errno())}")
        return self._sockopt.value

    def _restore_control_buffers(self):
        for option, value in self._control_buffers.items():
            if self._socket_option(option) == value:
                continue
            # The kernel doubles what is set (and reports the doubled size).
            self._sockopt.value = value // 2
            if (self._setsockopt(self._control_fd, _SOL_SOCKET, option,
                                 ctypes.byref(self._sockopt), ctypes.sizeof(ctypes.c_int)) != 0
                    or self._socket_option(option) != value):
                raise _Unclean("cannot give the control socket its buffer size back")

    def _drain_control(self):
        """Denial records of the earlier exec, read into a buffer zeroed
        afterwards. A read of 0 bytes means the socket was shut down (the
        supervisor never sends an empty record)."""
        if self._control_fd is None:
            return
        if self._socket_option(_SO_LOCK_FILTER):
            raise _Unclean("a socket filter was locked onto the control socket")
        self._sockopt.value = 0
        if (self._setsockopt(self._control_fd, _SOL_SOCKET, _SO_DETACH_FILTER,
                             ctypes.byref(self._sockopt), ctypes.sizeof(ctypes.c_int)) != 0
                and ctypes.get_errno() != errno.ENOENT):  # ENOENT: none attached
            raise _Unclean(f"cannot detach a socket filter from the control socket: "
                           f"{os.strerror(ctypes.get_errno())}")
        self._restore_control_buffers()
        # Non-blocking again first: the flag belongs to the socket's open
        # file description, which the code shared.
        fcntl.fcntl(self._control_fd, _F_SETFL, os.O_NONBLOCK)
        view = memoryview(self._scratch)
        used = 0
        try:
            while True:
                try:
                    n = os.readv(self._control_fd, [view])
                except (BlockingIOError, InterruptedError):
                    return
                used = max(used, n)
                if n == 0:
                    raise _Unclean("the control socket was shut down")
        finally:
            if used:
                view[:used] = bytes(used)

    def _owner(self, fd):
        return fcntl.fcntl(fd, _F_GETOWN_EX, bytes(8))  # struct f_owner_ex {int type; pid_t pid;}

    def _raw_socket_option(self, option):
        """The option's bytes, or None when this socket has no such option."""
        buf = ctypes.create_string_buffer(64)
        size = ctypes.c_uint(64)
        if self._getsockopt(self._control_fd, _SOL_SOCKET, option, buf, ctypes.byref(size)) != 0:
            return None
        return buf.raw[:size.value]

    def _put_back_descriptions(self):
        for fd in self._shared_fds:
            if self._owner(fd) != self._owners[fd]:
                fcntl.fcntl(fd, _F_SETOWN_EX, self._owners[fd])
            if fcntl.fcntl(fd, _F_GETSIG) != self._signals[fd]:
                fcntl.fcntl(fd, _F_SETSIG, self._signals[fd])
        if fcntl.fcntl(0, fcntl.F_GETFL) != self._stdin_flags:
            fcntl.fcntl(0, fcntl.F_SETFL, self._stdin_flags)
        for fd, (mode, times, hint) in self._pipes.items():
            _put_back_inode(fd, f"fd {fd}", None, hint, times, mode)
        for option, value in self._control_options.items():
            if self._raw_socket_option(option) == value:
                continue
            data = ctypes.create_string_buffer(value, len(value))
            if (self._setsockopt(self._control_fd, _SOL_SOCKET, option, data, len(value)) != 0
                    or self._raw_socket_option(option) != value):
                raise _Unclean(f"cannot give the control socket its option {option} back")

    def _release_locks(self):
        """flock and OFD locks on the shared descriptions, whole range."""
        fds = [0, *self._stdio]
        if self._control_fd is not None:
            fds.append(self._control_fd)
        # struct flock: l_type, l_whence, (pad), l_start, l_len, l_pid, (pad).
        unlock = struct.pack("hh4xqqi4x", fcntl.F_UNLCK, os.SEEK_SET, 0, 0, 0)
        for fd in fds:
            fcntl.flock(fd, fcntl.LOCK_UN)
            try:
                fcntl.fcntl(fd, fcntl.F_OFD_SETLK, unlock)
            except OSError as e:
                if e.errno != errno.EINVAL:  # a description that takes no record locks
                    raise

    def _reset_stdio(self):
        for fd in self._stdio:
            fcntl.fcntl(fd, _F_SETFL, 0)
            if fcntl.fcntl(fd, _F_GETPIPE_SZ) != _PIPE_SIZE:
                fcntl.fcntl(fd, _F_SETPIPE_SZ, _PIPE_SIZE)
