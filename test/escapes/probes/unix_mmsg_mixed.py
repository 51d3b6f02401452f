# sendmmsg on an AF_UNIX datagram socket whose first message goes to an
# abstract name and whose second names an IPv4 address the policy allows:
# the supervisor must not send the first (outside the exec's Landlock
# domain, with its own credentials) because the second was its to send.
import struct
rx = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
rx.bind(b"\0castellan-probe-rx")
rx.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
tx = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
class msghdr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32), ("iov", ctypes.c_void_p),
                ("iovlen", ctypes.c_size_t), ("control", ctypes.c_void_p),
                ("controllen", ctypes.c_size_t), ("flags", ctypes.c_int)]
class mmsghdr(ctypes.Structure):
    _fields_ = [("hdr", msghdr), ("len", ctypes.c_uint32)]
abstract = b"\x01\x00" + b"\0castellan-probe-rx"  # AF_UNIX, abstract name
inet = struct.pack("=H", socket.AF_INET) + struct.pack("!H", 9000) + socket.inet_aton("0.0.0.0") + bytes(8)
names = [ctypes.create_string_buffer(abstract, len(abstract)), ctypes.create_string_buffer(inet, 16)]
payload = ctypes.create_string_buffer(b"z", 1)
iov = iovec(ctypes.cast(payload, ctypes.c_void_p), 1)
msgs = (mmsghdr * 2)()
for i, (name, length) in enumerate(((names[0], len(abstract)), (names[1], 16))):
    msgs[i].hdr.name = ctypes.cast(name, ctypes.c_void_p)
    msgs[i].hdr.namelen = length
    msgs[i].hdr.iov = ctypes.addressof(iov)
    msgs[i].hdr.iovlen = 1
r = libc.sendmmsg(tx.fileno(), msgs, 2, 0)
sent = r if r >= 0 else errname(ctypes.get_errno())
rx.setblocking(False)
creds = None
try:
    _, anc, _, _ = rx.recvmsg(16, socket.CMSG_SPACE(12))
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
            creds = struct.unpack("iII", data[:12])
except BlockingIOError:
    pass
print("sendmmsg:", sent, "received credentials:", creds)
verdict("sent by another" if creds is not None and creds[0] != os.getpid() else
        "own" if creds is not None else str(sent))
