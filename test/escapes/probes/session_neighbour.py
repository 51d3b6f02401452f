# From one session's worker, reach for another session's worker: its host
# pid (OTHER_PID) by signal and pidfd, its /proc entry, its files in /tmp,
# and any process whose environment or command line holds its marker (MARK).
import signal
def scan():
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        for name in ("environ", "cmdline"):
            try:
                if MARK.encode() in open(f"/proc/{entry}/{name}", "rb").read():
                    return "found:" + entry
            except OSError:
                pass
    return "nothing"
NR_pidfd_open = 434  # x86_64
verdict(" ".join([
    try_os(lambda: os.kill(OTHER_PID, 0)),
    "present" if os.path.exists(f"/proc/{OTHER_PID}") else "absent",
    try_os(lambda: open("/tmp/" + MARK).read()),
    scan(),
    sys_call(NR_pidfd_open, OTHER_PID, 0),
]))
