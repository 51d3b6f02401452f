# A symlink in /tmp that leads to another process's /proc entry: the
# supervisor resolves it inside the sandbox and must refuse what it reaches.
os.symlink("/proc/1", "/tmp/p1")
def read():
    with open("/tmp/p1/cmdline", "rb") as f:
        f.read()
verdict(try_os(read))
