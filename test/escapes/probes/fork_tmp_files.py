# Fork mode, two execs on one worker: files the first leaves in /tmp and
# /dev/shm (one in a directory it made unreadable, a symlink out of /tmp, a
# fifo) must be gone for the second.
if PHASE == 1:
    open("/tmp/secret", "w").write("castellan")
    os.makedirs("/tmp/deep/er")
    open("/tmp/deep/er/secret", "w").write("castellan")
    os.chmod("/tmp/deep/er", 0)
    os.chmod("/tmp/deep", 0o100)
    os.symlink("/usr", "/tmp/link")
    os.mkfifo("/tmp/fifo")
    open("/dev/shm/secret", "w").write("castellan")
    verdict("planted")
else:
    left = os.listdir("/tmp") + ["shm/" + n for n in os.listdir("/dev/shm")]
    verdict("empty" if not left else "found:" + ",".join(sorted(left)))
