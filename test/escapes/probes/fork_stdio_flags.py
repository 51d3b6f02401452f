# Fork mode, two execs on one worker: fd 1 is a pipe whose open file
# description every exec shares; the first makes it non-blocking (so the
# next exec's large writes would fail with EAGAIN).
import fcntl
if PHASE == 1:
    fcntl.fcntl(1, fcntl.F_SETFL, fcntl.fcntl(1, fcntl.F_GETFL) | os.O_NONBLOCK)
    verdict("planted")
else:
    verdict("nonblocking" if fcntl.fcntl(1, fcntl.F_GETFL) & os.O_NONBLOCK else "blocking")
