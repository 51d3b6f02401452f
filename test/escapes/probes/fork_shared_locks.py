# Isolated mode, two execs on one worker: fd 0, 1 and 2 are open file
# descriptions every exec shares with the zygote. flock and OFD locks belong
# to the description, so they would outlive the exec, and a lock's byte
# range carries data. The first exec takes them; the second looks.
import fcntl, struct
if PHASE == 1:
    fcntl.flock(0, fcntl.LOCK_SH)
    fcntl.flock(1, fcntl.LOCK_EX)
    fcntl.fcntl(0, fcntl.F_OFD_SETLK, struct.pack("hh4xqqi4x", fcntl.F_RDLCK, 0, 1234, 5678, 0))
    verdict("planted")
else:
    held = [fd for fd in (0, 1, 2) if "lock:" in open(f"/proc/self/fdinfo/{fd}").read()]
    verdict("locked " + ",".join(map(str, held)) if held else "none")
