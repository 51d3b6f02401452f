# Isolated mode, two execs on one worker: what the first can write on the
# descriptions it shares with the zygote (fd 0, 1, 2), on the inodes of the
# fd 1/2 pipes and on /tmp's and /dev/shm's own directories, where the next
# exec could read it back: 64-bit times, a mode, write hints, inode flags,
# the owner and signal of a description, fd 0's status flags.
import fcntl, signal
F_SETOWN, F_GETOWN, F_SETSIG, F_GETSIG = 8, 9, 10, 11
F_GET_RW_HINT, F_SET_RW_HINT = 1035, 1036
FS_IOC_GETFLAGS, FS_IOC_SETFLAGS = 0x80086601, 0x40086602
FS_NODUMP_FL = 0x40
STAMP = 1234567890123456789
HINT = (3).to_bytes(8, "little")
def hint(fd):
    return fcntl.fcntl(fd, F_GET_RW_HINT, bytes(8))
def flags(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    buf = bytearray(8)
    fcntl.ioctl(fd, FS_IOC_GETFLAGS, buf)
    os.close(fd)
    return int.from_bytes(buf[:4], "little")
if PHASE == 1:
    done = []
    for what, fn in (
            ("fd1_times", lambda: os.utime(1, ns=(STAMP, STAMP))),
            ("fd2_mode", lambda: os.chmod(2, 0o640)),
            ("fd1_hint", lambda: fcntl.fcntl(1, F_SET_RW_HINT, HINT)),
            ("sig", lambda: [fcntl.fcntl(fd, F_SETSIG, 40 + fd) for fd in (0, 1, 2)]),
            ("own", lambda: fcntl.fcntl(1, F_SETOWN, os.getpid())),
            ("fd0_flags", lambda: fcntl.fcntl(0, fcntl.F_SETFL, os.O_APPEND | os.O_NONBLOCK)),
            ("tmp_times", lambda: os.utime("/tmp", ns=(STAMP, STAMP))),
            ("shm_times", lambda: os.utime("/dev/shm", ns=(STAMP, STAMP))),
            ("tmp_hint", lambda: fcntl.fcntl(os.open("/tmp", os.O_RDONLY), F_SET_RW_HINT, HINT)),
            ("tmp_flags", lambda: fcntl.ioctl(os.open("/tmp", os.O_RDONLY), FS_IOC_SETFLAGS,
                                              bytearray(FS_NODUMP_FL.to_bytes(8, "little"))))):
        if try_os(fn) == "ok":
            done.append(what)
    print("planted:", done)
    verdict("planted")
else:
    carried = []
    if os.stat(1).st_mtime_ns == STAMP:
        carried.append("fd1_times")
    if os.stat(2).st_mode & 0o777 == 0o640:
        carried.append("fd2_mode")
    if hint(1) == HINT:
        carried.append("fd1_hint")
    if any(fcntl.fcntl(fd, F_GETSIG) == 40 + fd for fd in (0, 1, 2)):
        carried.append("sig")
    if fcntl.fcntl(1, F_GETOWN) != 0:
        carried.append("own")
    if fcntl.fcntl(0, fcntl.F_GETFL) & (os.O_APPEND | os.O_NONBLOCK):
        carried.append("fd0_flags")
    if os.stat("/tmp").st_mtime_ns == STAMP:
        carried.append("tmp_times")
    if os.stat("/dev/shm").st_mtime_ns == STAMP:
        carried.append("shm_times")
    if hint(os.open("/tmp", os.O_RDONLY)) == HINT:
        carried.append("tmp_hint")
    if flags("/tmp") & FS_NODUMP_FL:
        carried.append("tmp_flags")
    verdict("carried " + ",".join(carried) if carried else "clean")
