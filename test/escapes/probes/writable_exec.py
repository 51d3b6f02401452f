# Copy a denied program to each writable place (/tmp, /dev/shm, an unnamed
# O_TMPFILE in /tmp) and run it there: noexec mounts, and no Landlock
# EXECUTE on them.
data = open("/usr/bin/dash", "rb").read()
def place(path):
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, 0o755)
    return lambda: os.execve(path, SHELL_RAN, {})
def tmpfile():
    fd = os.open("/tmp", os.O_TMPFILE | os.O_WRONLY, 0o755)
    os.write(fd, data)
    return lambda: os.execve("/proc/self/fd/%d" % fd, SHELL_RAN, {})
verdict(" ".join(try_exec(lambda: place(p)()) for p in ("/tmp/dash", "/dev/shm/dash")) + " " +
        try_exec(lambda: tmpfile()()))
