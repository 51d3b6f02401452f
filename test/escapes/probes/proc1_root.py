# Reach PID 1 (castellan-worker) and its root through /proc.
verdict(try_os(lambda: os.listdir("/proc/1/root/")))
