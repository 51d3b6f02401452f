"""castellan_denials: names the policy and rule behind a PermissionError.

The supervisor writes a record of each system call it denies on the control
socket (docs/wire.md, "Denials") before it answers the call; PolicyDenials
wraps the functions through which code opens, executes, links and connects,
so that their PermissionError says which policy rule refused it. Imported
after READY, and only by a worker that has a control socket.
"""

import builtins
import io
import os

import castellan_plumbing as plumbing

# What serving a request needs, imported after READY: bound by
# castellan_plumbing (late_bound) once imported.
functools = socket = None
plumbing.late_bound(globals())


class PolicyDenials:
    """The details of the system calls the supervisor denied, read from the
    control socket (docs/wire.md, "Denials"). The supervisor writes each one
    before it answers the call, so when a call fails with EACCES its record
    is already here. A PermissionError raised by the wrapped functions then
    names the policy and the rule; the errno stays what the kernel said."""

    _KEEP = 64

    def __init__(self, fd):
        self._sock = socket.socket(fileno=fd)
        self._sock.setblocking(False)
        self._recent = []

    def _drain(self):
        while True:
            try:
                data = self._sock.recv(8192)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            if not data:
                return
            parts = data.split(b"\0")
            if len(parts) != 6 or parts[0] != b"DENY":
                continue
            self._recent.append([p.decode("utf-8", "backslashreplace") for p in parts[1:]])
            del self._recent[:-self._KEEP]

    # The calls behind the socket methods that raise without a file name:
    # only their own records explain them.
    _SOCKET_CALLS = {
        "connect": ("connect",),
        "bind": ("bind",),
        "sendto": ("sendto",),
        "sendmsg": ("sendmsg", "sendmmsg"),
    }

    def explain(self, error, syscalls=None):
        """A PermissionError naming the policy and rule behind `error`, or None.
        A record matches by path (either of the call's two names), or, for a
        call without a name (a socket), by system call."""
        self._drain()
        names = []
        for name in (error.filename, getattr(error, "filename2", None)):
            if isinstance(name, bytes):
                name = name.decode("utf-8", "backslashreplace")
            if name is not None:
                names.append(os.fspath(name) if not isinstance(name, int) else str(name))
        for i in range(len(self._recent) - 1, -1, -1):
            syscall, path, policy, rule, err = self._recent[i]
            if err != str(error.errno):
                continue
            if syscalls is not None:
                matches = syscall in syscalls
            elif not names:
                matches = True
            else:
                matches = any(n == path or path.endswith("/" + os.path.basename(n.rstrip("/")))
                              for n in names)
            if matches:
                del self._recent[i]
                message = (f"Permission denied by policy {policy!r} "
                           f"(rule {rule}: {syscall} {path})")
                return PermissionError(error.errno, message, error.filename, None,
                                       getattr(error, "filename2", None))
        return None

    def wrap(self, fn, syscalls=None):
        denials = self

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except PermissionError as e:
                better = denials.explain(e, syscalls)
                if better is None:
                    raise
                raise better from None
        return wrapper

    def install(self):
        """Wraps the functions through which code opens, executes, creates,
        removes, renames and links files, and connects, binds and sends to
        addresses."""
        builtins.open = self.wrap(builtins.open)
        io.open = builtins.open
        for name in ("open", "execv", "execve", "execvp", "execvpe", "execl", "execle",
                     "execlp", "execlpe", "listdir", "scandir", "mkdir", "makedirs",
                     "unlink", "remove", "rmdir", "removedirs", "rename", "renames",
                     "replace", "link", "symlink", "truncate", "mknod", "mkfifo"):
            fn = getattr(os, name, None)
            if fn is None:
                continue
            wrapped = self.wrap(fn)
            setattr(os, name, wrapped)
            # shutil and others test these sets by identity (rmtree chooses
            # its symlink-safe variant when os.unlink supports dir_fd).
            for support in ("supports_dir_fd", "supports_fd", "supports_follow_symlinks",
                            "supports_effective_ids"):
                group = getattr(os, support, None)
                if isinstance(group, set) and fn in group:
                    group.add(wrapped)
        for name, syscalls in self._SOCKET_CALLS.items():
            fn = getattr(socket.socket, name, None)
            if fn is not None:
                setattr(socket.socket, name, self.wrap(fn, syscalls))
        self._keep_unix_names()

    @staticmethod
    def _keep_unix_names():
        """The supervisor binds a pathname socket relative to the directory
        it checked, so the kernel records the name without its directory
        (docs/security.md). getsockname() answers the path the code bound,
        as it would without the supervisor: multiprocessing, for one, hands
        that address to the processes that connect."""
        import weakref  # installed after READY, with the serving modules

        bound = weakref.WeakKeyDictionary()
        plain_bind = socket.socket.bind
        plain_name = socket.socket.getsockname

        def bind(sock, address):
            plain_bind(sock, address)
            if sock.family == socket.AF_UNIX and isinstance(address, (str, bytes, os.PathLike)):
                path = os.fsdecode(address)
                if path and path[0] != "\0":
                    bound[sock] = path

        def getsockname(sock):
            name = plain_name(sock)
            path = bound.get(sock)
            if (path is not None and isinstance(name, str) and "/" in path
                    and name == os.path.basename(path)):
                return path
            return name

        bind.__wrapped__ = plain_bind
        getsockname.__wrapped__ = plain_name
        socket.socket.bind = bind
        socket.socket.getsockname = getsockname
