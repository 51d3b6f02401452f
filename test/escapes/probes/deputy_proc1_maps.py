# Under a mediating policy the supervisor opens files for the worker: make it
# open PID 1's (castellan-worker's) memory map, which the worker cannot.
def read():
    with open("/proc/1/maps") as f:
        f.read()
verdict(try_os(read))
