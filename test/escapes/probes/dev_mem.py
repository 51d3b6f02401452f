# Open physical memory.
verdict(try_os(lambda: open("/dev/mem", "rb")))
