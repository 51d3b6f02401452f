# Fork mode, two execs on one worker, under a policy whose calls the
# supervisor decides: fd 8 is the control socket on which the supervisor
# writes its denial records (shared by every exec). The first exec shrinks
# its receive buffer, so that the next exec's records would no longer fit.
import socket
s = socket.socket(fileno=os.dup(8))
if PHASE == 1:
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 0)
    verdict("planted")
else:
    verdict("small" if s.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) <= 4608 else "restored")
