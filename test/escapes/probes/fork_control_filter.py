# Isolated mode, two execs on one worker, under a policy whose calls the
# supervisor decides: fd 8 is the control socket on which the supervisor
# writes its denial records. The first exec attaches a socket filter that
# drops every record (the next exec's PermissionErrors would no longer name
# the rule); the second looks for it. With LOCK set, the filter cannot be
# taken off: the worker must not serve another exec.
import socket, struct
SO_ATTACH_FILTER, SO_DETACH_FILTER, SO_LOCK_FILTER = 26, 27, 44
s = socket.socket(fileno=os.dup(8))
if PHASE == 1:
    drop = (ctypes.c_uint64 * 1)(0x0000000000000006)  # BPF_RET|BPF_K, k=0
    prog = struct.pack("HL", 1, ctypes.addressof(drop))
    s.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, prog)
    if LOCK:
        s.setsockopt(socket.SOL_SOCKET, SO_LOCK_FILTER, 1)
    verdict("planted")
else:
    r = try_os(lambda: s.setsockopt(socket.SOL_SOCKET, SO_DETACH_FILTER, 0))
    verdict("filtered" if r == "ok" else "clean" if r == "ENOENT" else r)
