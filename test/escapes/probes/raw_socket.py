# Open a raw socket (packet forging).
verdict(try_os(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)))
