# The same through PID 1's command line (hidden from the worker by hidepid).
def read():
    with open("/proc/1/cmdline", "rb") as f:
        f.read()
verdict(try_os(read))
