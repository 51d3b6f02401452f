# Fork mode: open the wire's memfd (the rings, with every frame the
# supervisor sent) read-write through the harness's /proc/2/fd.
def ring():
    for fd in os.listdir("/proc/2/fd"):
        if "castellan-segment" in os.readlink(f"/proc/2/fd/{fd}"):
            os.close(os.open(f"/proc/2/fd/{fd}", os.O_RDWR))
            return
    raise OSError(errno.ESRCH, "no segment fd")
verdict(try_os(ring))
