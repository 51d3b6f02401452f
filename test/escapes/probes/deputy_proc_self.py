# /proc/self and /proc/thread-self opened by the supervisor must name the
# caller (its own numbers in the sandbox), from the main thread and another.
import threading
def pid_of(path, key):
    with open(path) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
seen = {}
def look():
    seen["thread"] = (pid_of("/proc/thread-self/status", "Pid"), threading.get_native_id())
t = threading.Thread(target=look)
t.start()
t.join()
main = pid_of("/proc/self/status", "Pid") == os.getpid()
other = seen["thread"][0] == seen["thread"][1]
verdict("caller" if main and other else "other %r %r" % (main, seen))
