# Look for other workers' shared memory in /dev/shm and SysV IPC.
names = os.listdir("/dev/shm")
ipc = open("/proc/sysvipc/shm").read().count("\n") - 1 if os.path.exists("/proc/sysvipc/shm") else 0
verdict("empty" if not names and ipc <= 0 else "found:" + ",".join(names))
