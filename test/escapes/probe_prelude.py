# Prepended to every probe (probes/*.py) by escapes_test.cpp: the helpers a
# probe reports with. Each probe prints one verdict: the errno name the
# kernel answered ("ok" if it did not refuse), or what the probe saw.
import ctypes, errno, os, socket
libc = ctypes.CDLL(None, use_errno=True)
def verdict(x):
    print("verdict:", x)
def errname(e):
    return errno.errorcode.get(e, str(e))
def sys_call(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return "ok" if r >= 0 else errname(ctypes.get_errno())
def try_os(fn):
    try:
        fn()
        return "ok"
    except OSError as e:
        return errname(e.errno)
AT_EMPTY_PATH = 0x1000
NR_execveat = 322  # x86_64
def try_exec(run):
    # Runs run() in a child, where it execs a program that prints "ran" on
    # fd 1: "ok" when that program ran, else the errno name the child's
    # first refused call answered.
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.dup2(w, 1)
            run()
            os.write(w, b"returned")
        except OSError as e:
            os.write(w, errname(e.errno).encode())
        finally:
            os._exit(0)
    os.close(w)
    out = b""
    while True:
        chunk = os.read(r, 4096)
        if not chunk:
            break
        out += chunk
    os.close(r)
    os.waitpid(pid, 0)
    out = out.decode(errors="replace").strip()
    return "ok" if out == "ran" else out
def copy_to_memfd(path, flags=0):
    # A memfd holding a copy of `path`, made executable if the kernel lets it.
    fd = os.memfd_create("copy", flags)
    os.write(fd, open(path, "rb").read())
    try:
        os.fchmod(fd, 0o755)
    except OSError:
        pass
    return fd
SHELL_RAN = ["dash", "-c", "echo ran"]
