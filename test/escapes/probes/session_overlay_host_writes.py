# Everything hostile code does to the host directory a session overlays
# (HOST) lands in its upper layer: a hard link, a rename, a setuid chmod,
# times, a user xattr, a truncate and an unlink of the host's file
# (HOST/kept.txt, of the sandbox's own host ids) leave the host's file as
# it was (checked on the host). A directory that came from the host does
# not move (no redirect_dir: EXDEV), and no whiteout is made by hand.
f = HOST + "/kept.txt"
verdict(" ".join([
    try_os(lambda: os.link(f, HOST + "/kept-link")),
    try_os(lambda: os.chmod(f, 0o4755)),
    try_os(lambda: os.utime(f, (0, 0))),
    try_os(lambda: os.setxattr(f, "user.castellan", b"x")),
    try_os(lambda: os.truncate(f, 0)),
    try_os(lambda: os.rename(f, HOST + "/moved.txt")),
    try_os(lambda: os.unlink(HOST + "/moved.txt")),
    try_os(lambda: os.rename(HOST + "/dir", HOST + "/dir2")),
    try_os(lambda: os.mknod(HOST + "/wh", 0o600 | 0o020000, os.makedev(0, 0))),
]))
