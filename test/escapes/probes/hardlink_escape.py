# A hard link to a system file from writable /tmp.
verdict(try_os(lambda: os.link("/etc/passwd", "/tmp/passwd-link")))
