# Fork mode: reach the harness (pid 2, which holds the wire) through /proc:
# its memory map, environment, memory and open fds. The verdict is every
# errno seen, sorted ("ok" for each that worked).
def tries(pid):
    def read_mem():
        start = int(open(f"/proc/{pid}/maps").readline().split("-")[0], 16)
        with open(f"/proc/{pid}/mem", "rb") as m:
            m.seek(start)
            m.read(16)
    return [try_os(lambda: open(f"/proc/{pid}/maps").read()),
            try_os(lambda: open(f"/proc/{pid}/environ", "rb").read()),
            try_os(lambda: open(f"/proc/{pid}/mem", "rb").read(0)),
            try_os(read_mem),
            try_os(lambda: os.listdir(f"/proc/{pid}/fd"))]
verdict(",".join(sorted(set(tries(2)))))
