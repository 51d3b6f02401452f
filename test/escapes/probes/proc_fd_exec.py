# Run a denied program through /proc/self/fd/N: of a file opened from its
# path (O_PATH), and of a memfd holding a copy.
def through_proc(fd):
    return lambda: os.execve("/proc/self/fd/%d" % fd, SHELL_RAN, {})
verdict(try_exec(lambda: through_proc(os.open("/usr/bin/dash", os.O_PATH))()) + " " +
        try_exec(lambda: through_proc(copy_to_memfd("/usr/bin/dash"))()))
