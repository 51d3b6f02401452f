# The supervisor performs a datagram socket's bind itself, on its own
# duplicate of the caller's socket. The caller's fd number can name another
# socket by then: one thread binds fd N (a UDP socket) to 0.0.0.0:9000,
# which loopback_udp.json allows for UDP, while another keeps swapping a TCP
# socket onto N (dup2). A TCP socket bound by the supervisor would be out of
# the worker's Landlock domain, which lets TCP bind nowhere: it must never
# end up bound (nor listening).
import threading
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
addr = ctypes.create_string_buffer(
    (socket.AF_INET).to_bytes(2, "little") + (9000).to_bytes(2, "big") + bytes(12), 16)
slot = os.dup(udp.fileno())
stop = False
tcp_bound = 0
def swap(tcp):
    while not stop:
        os.dup2(tcp.fileno(), slot)
        os.dup2(udp.fileno(), slot)
answers = {}
for i in range(300):
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    stop = False
    t = threading.Thread(target=swap, args=(tcp,))
    t.start()
    for j in range(10):
        r = libc.bind(slot, addr, 16)
        e = "ok" if r == 0 else errname(ctypes.get_errno())
        answers[e] = answers.get(e, 0) + 1
        if r == 0:
            break
    stop = True
    t.join()
    if tcp.getsockname()[1] != 0:
        tcp_bound += 1
    tcp.close()
    # A fresh UDP socket for the next round (this one may be bound now).
    udp.close()
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    os.dup2(udp.fileno(), slot)
print(answers)
verdict("%d TCP sockets bound" % tcp_bound if tcp_bound else "no TCP socket bound")
