# Route netlink: which interfaces exist (only loopback).
verdict(",".join(sorted(n for _, n in socket.if_nameindex())))
