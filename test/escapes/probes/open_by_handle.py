# open_by_handle_at bypasses path checks (Shocker).
handle = ctypes.create_string_buffer(136)
verdict(sys_call(304, -100, handle, 0))
