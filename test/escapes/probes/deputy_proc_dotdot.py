# Other ways to name PID 1's entry that a check on "/proc/<n>" at the start of
# the path alone would miss: "..", a directory fd of /proc, /proc/self/..
def read(path, **kw):
    def go():
        fd = os.open(path, os.O_RDONLY, **kw)
        os.close(fd)
    return try_os(go)
proc = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY)
seen = {read("/proc/self/../1/cmdline"), read("1/cmdline", dir_fd=proc),
        read("//proc/./1/cmdline"), read("/proc/thread-self/../../../1/cmdline")}
verdict(" ".join(sorted(seen)))
