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
