# Mount a file system.
verdict(sys_call(165, b"none", b"/tmp", b"tmpfs", 0, 0))
