# files_out: the exec leaves something that keeps changing what its files_out
# path is while the worker reads it back: a regular file, a symlink to a
# file the exec may not have back (/etc/passwd, outside the places files
# may be), a FIFO nobody writes (a reader that opens it blocking would hang
# the worker), and a directory holding a symlink. In shared mode a thread of
# the code runs on beside the harness; in isolated mode a process the code
# forked outlives it (the worker then retires, but reads the files first).
# The runner checks the result's files: never the symlink's target, never a
# hang.
import os
import threading
import time

os.chdir("/tmp")
for name in ("reg", "link", "fifo"):
    try:
        os.unlink(name)
    except FileNotFoundError:
        pass
with open("reg", "w") as f:
    f.write("regular")
os.symlink("/etc/passwd", "link")
os.mkfifo("fifo")


def swap(seconds):
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        for src in ("link", "fifo", "reg"):
            tmp = f".swap{n}"
            n += 1
            try:
                os.link(src, tmp, follow_symlinks=False)
                os.rename(tmp, "out")
            except OSError:
                pass


if ISOLATED:
    if os.fork() == 0:
        swap(3)
        os._exit(0)
else:
    threading.Thread(target=swap, args=(3,), daemon=True).start()
time.sleep(0.05)
verdict("swapping")
