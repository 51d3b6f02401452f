# Connect to the cloud metadata service.
def go():
    s = socket.socket()
    s.settimeout(2)
    s.connect(("169.254.169.254", 80))
verdict(try_os(go))
