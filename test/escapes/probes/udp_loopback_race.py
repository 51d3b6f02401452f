# The supervisor decides a datagram's destination from a copy of the
# address; the caller's memory can change after that copy. Under
# loopback_udp.json a send to 10.0.0.1:9000 is allowed (the namespace has no
# route there) and one to 127.0.0.1:9000 is denied; a listener on
# 0.0.0.0:9000 sees whatever reaches the sandbox's loopback. One thread
# flips the address between the two while the other sends (sendto) and
# connects then sends (connect + send): a datagram that arrives got through
# with an address that was never decided.
import struct, threading
rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
rx.bind(("0.0.0.0", 9000))
rx.setblocking(False)
def sockaddr(ip):
    return struct.pack("=H", socket.AF_INET) + struct.pack("!H", 9000) + socket.inet_aton(ip) + bytes(8)
allowed, denied = sockaddr("10.0.0.1"), sockaddr("127.0.0.1")
addr = ctypes.create_string_buffer(allowed, 16)
stop = False
def flip():
    while not stop:
        ctypes.memmove(addr, denied, 16)
        ctypes.memmove(addr, allowed, 16)
t = threading.Thread(target=flip)
t.start()
answers = {}
tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(3000):
    if i % 2 == 0:
        r = libc.sendto(tx.fileno(), b"x", 1, 0, addr, 16)
    else:
        c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        r = libc.connect(c.fileno(), addr, 16)
        if r == 0:
            r = libc.send(c.fileno(), b"y", 1, 0)
        c.close()
    e = "ok" if r >= 0 else errname(ctypes.get_errno())
    answers[e] = answers.get(e, 0) + 1
stop = True
t.join()
got = 0
while True:
    try:
        rx.recv(16)
        got += 1
    except BlockingIOError:
        break
print(answers)
verdict("%d arrived" % got if got else "none arrived")
