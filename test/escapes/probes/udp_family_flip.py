# The supervisor decides a datagram call by the address family it copied;
# an IPv4 socket's bind and sendmsg take AF_UNSPEC as AF_INET. Under
# loopback_udp.json 127.0.0.1:9001 is denied. A bind with AF_UNSPEC to
# 0.0.0.0:9002 (denied) asks for that directly; then one thread flips the
# family of the address 127.0.0.1:9001 between AF_UNSPEC and AF_INET while
# another sends and connects to it: a datagram that arrives got through
# with an address that was never decided.
import struct, threading
rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
rx.bind(("0.0.0.0", 9000))  # the one port the policy allows to bind
def sockaddr(family, port, ip):
    return struct.pack("=H", family) + struct.pack("!H", port) + socket.inet_aton(ip) + bytes(8)
b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
unspec_bind = "ok" if libc.bind(b.fileno(), ctypes.create_string_buffer(sockaddr(0, 9002, "0.0.0.0"), 16), 16) == 0 \
    else errname(ctypes.get_errno())
print("AF_UNSPEC bind to a denied port:", unspec_bind)
# A receiver on the denied destination: bound by the caller itself would be
# refused, so it listens on 0.0.0.0:9000 and the flipped address targets it
# through 127.0.0.1:9000... which is denied as a destination (only the bind
# is allowed).
inet, unspec = sockaddr(socket.AF_INET, 9000, "127.0.0.1"), sockaddr(0, 9000, "127.0.0.1")
addr = ctypes.create_string_buffer(unspec, 16)
stop = False
def flip():
    while not stop:
        ctypes.memmove(addr, inet, 16)
        ctypes.memmove(addr, unspec, 16)
t = threading.Thread(target=flip)
t.start()
tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
answers = {}
for i in range(2000):
    if i % 2 == 0:
        r = libc.sendto(tx.fileno(), b"x", 1, 0, addr, 16)
    else:
        c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        r = libc.connect(c.fileno(), addr, 16)
        if r == 0:
            r = libc.send(c.fileno(), b"y", 1, 0)
        c.close()
    key = "ok" if r >= 0 else errname(ctypes.get_errno())
    answers[key] = answers.get(key, 0) + 1
stop = True
t.join()
rx.setblocking(False)
arrived = 0
try:
    while True:
        rx.recv(16)
        arrived += 1
except BlockingIOError:
    pass
print("answers", answers, "arrived", arrived)
verdict("bound" if unspec_bind == "ok" else f"{arrived} arrived" if arrived else "none arrived")
