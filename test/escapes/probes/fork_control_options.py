# Isolated mode, two execs on one worker, under a policy whose calls the
# supervisor decides: the control socket (fd 8) is one description every exec
# shares. The first exec sets its socket options (and its signal) to chosen
# values; the second reads them back.
import fcntl, socket, struct
F_SETSIG, F_GETSIG = 10, 11
s = socket.socket(fileno=os.dup(8))
PLANT = {socket.SO_PASSCRED: 1, socket.SO_RCVLOWAT: 12345, 42: 777,  # SO_PEEK_OFF
         socket.SO_PRIORITY: 5}
TIMEOUT = struct.pack("ll", 99, 0)
if PHASE == 1:
    for option, value in PLANT.items():
        try_os(lambda: s.setsockopt(socket.SOL_SOCKET, option, value))
    try_os(lambda: s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, TIMEOUT))
    try_os(lambda: fcntl.fcntl(8, F_SETSIG, 33))
    verdict("planted")
else:
    carried = [str(o) for o, v in PLANT.items() if s.getsockopt(socket.SOL_SOCKET, o) == v]
    if s.getsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, 16) == TIMEOUT:
        carried.append("rcvtimeo")
    if fcntl.fcntl(8, F_GETSIG) == 33:
        carried.append("sig")
    verdict("carried " + ",".join(carried) if carried else "clean")
