# Connect to a service on the host's loopback (sshd).
def go():
    s = socket.socket()
    s.settimeout(2)
    s.connect(("127.0.0.1", 22))
verdict(try_os(go))
