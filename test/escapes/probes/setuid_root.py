# Become root.
verdict(try_os(lambda: os.setuid(0)))
