# Isolated mode, under a policy whose calls the supervisor decides: fd 8 is
# the control socket to the supervisor, which stops reading it once it has
# the notify listener. An exec that sends on it would park data or
# descriptors (a memfd, a bound socket) there for the worker's lifetime.
import socket, array
s = socket.socket(fileno=os.dup(8))
fd = os.memfd_create("parked")
plain = try_os(lambda: s.send(b"x"))
with_fd = try_os(lambda: s.sendmsg([b"y"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                              array.array("i", [fd]))]))
verdict(plain if plain == with_fd else plain + "/" + with_fd)
