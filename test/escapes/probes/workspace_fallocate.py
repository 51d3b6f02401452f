# Reserve more than the quota in one call (the test's workspace has 8 MiB).
fd = os.open("/workspace/reserve", os.O_CREAT | os.O_WRONLY, 0o644)
verdict(try_os(lambda: os.posix_fallocate(fd, 0, 64 << 20)))
