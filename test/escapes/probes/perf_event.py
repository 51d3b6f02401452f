# perf_event_open (kernel info leaks, historic exploits).
attr = ctypes.create_string_buffer(128)
verdict(sys_call(298, attr, 0, -1, -1, 0))
