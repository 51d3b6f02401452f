# A connect to a pathname socket the supervisor decides gives the caller a
# socket the supervisor created. It must belong to the sandbox's network
# namespace: one in the host's would let the code bind abstract names there
# (squatting what host services listen on).
SO_NETNS_COOKIE = 71
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind("/tmp/deputy.sock")
srv.listen(1)
cli = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
cli.connect("/tmp/deputy.sock")
mine = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
cookie = lambda s: s.getsockopt(socket.SOL_SOCKET, SO_NETNS_COOKIE, 8)
if cookie(cli) != cookie(mine):
    # Show what it allows: an abstract name bound in the other namespace.
    cli.bind("\0castellan-deputy-squat")
    verdict("other netns")
else:
    verdict("sandbox netns")
