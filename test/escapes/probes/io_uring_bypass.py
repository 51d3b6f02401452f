# io_uring_setup: a ring would run openat outside seccomp's sight.
params = ctypes.create_string_buffer(120)
verdict(sys_call(425, 8, params))
