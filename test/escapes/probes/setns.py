# Join another namespace through an ns fd.
fd = os.open("/proc/self/ns/uts", os.O_RDONLY)
verdict(sys_call(308, fd, 0))
