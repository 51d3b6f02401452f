# A hard link to a system file from the writable workspace.
verdict(try_os(lambda: os.link("/etc/passwd", "/workspace/passwd-link")))
