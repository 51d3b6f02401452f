# Read the file system's own lost+found (root's on the host).
verdict(try_os(lambda: os.listdir("/workspace/lost+found")))
