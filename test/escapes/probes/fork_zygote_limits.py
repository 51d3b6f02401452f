# Isolated mode, two execs on one worker: the first lowers the limits and
# scheduling of the zygote (pid 3), which the next exec's process would
# inherit; the second looks at its own.
import resource
NR_ioprio_set, NR_ioprio_get = 251, 252  # x86_64
if PHASE == 1:
    for fn in (lambda: resource.prlimit(3, resource.RLIMIT_FSIZE, (4096, 4096)),
               lambda: resource.prlimit(3, resource.RLIMIT_NOFILE, (16, 16)),
               lambda: resource.prlimit(3, resource.RLIMIT_NPROC, (1, 1)),
               lambda: os.setpriority(os.PRIO_PROCESS, 3, 7),
               lambda: os.sched_setscheduler(3, os.SCHED_IDLE, os.sched_param(0)),
               lambda: libc.syscall(NR_ioprio_set, 1, 3, 3 << 13)):
        try_os(fn)
    verdict("planted")
else:
    seen = []
    if resource.getrlimit(resource.RLIMIT_FSIZE) == (4096, 4096):
        seen.append("fsize")
    if resource.getrlimit(resource.RLIMIT_NOFILE) == (16, 16):
        seen.append("nofile")
    if resource.getrlimit(resource.RLIMIT_NPROC) == (1, 1):
        seen.append("nproc")
    if os.getpriority(os.PRIO_PROCESS, 0) == 7:
        seen.append("nice")
    if os.sched_getscheduler(0) == os.SCHED_IDLE:
        seen.append("sched")
    if libc.syscall(NR_ioprio_get, 1, 0) == 3 << 13:
        seen.append("ioprio")
    verdict("changed " + ",".join(seen) if seen else "unchanged")
