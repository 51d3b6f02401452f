# Send a UDP datagram to a public resolver.
def go():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"x", ("8.8.8.8", 53))
verdict(try_os(go))
