# files_out that would cost the reader: a sparse file of 1 TiB (its size
# says so, its pages do not exist), a FIFO with no writer (a blocking open
# waits forever), a socket, and a device node's symlink. The runner checks
# they come back as too_large or not_regular, promptly.
import os
import socket

os.chdir("/tmp")
with open("huge", "wb") as f:
    f.truncate(1 << 40)
os.mkfifo("fifo")
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("/tmp/sock")
os.symlink("/dev/zero", "zero")
verdict("planted")
