# Fork mode, two execs on one worker: the first marks /tmp itself (an
# extended attribute, its mode), which no file removal would undo.
import stat
if PHASE == 1:
    os.setxattr("/tmp", "user.castellan", b"secret")
    os.chmod("/tmp", 0o700)
    verdict("planted")
else:
    mode = stat.S_IMODE(os.stat("/tmp").st_mode)
    attrs = os.listxattr("/tmp")
    verdict("clean" if not attrs and mode == 0o1777 else f"found:{oct(mode)}:{attrs}")
