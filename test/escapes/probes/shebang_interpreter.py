# Scripts whose #! line names a denied interpreter: the shell itself, and the
# dynamic loader running the shell. The script is a memfd (the only place a
# script could have the EXECUTE right on the old layout).
def script(first_line):
    def run():
        fd = os.memfd_create("script", 0)
        os.write(fd, first_line + b"\necho ran\n")
        try:
            os.fchmod(fd, 0o755)
        except OSError:
            pass
        os.execve("/proc/self/fd/%d" % fd, ["script"], {})
    return run
verdict(try_exec(script(b"#!/usr/bin/dash")) + " " +
        try_exec(script(b"#!/lib64/ld-linux-x86-64.so.2 /usr/bin/dash")))
