# Isolated mode: every process of the sandbox has the same uid, which is all
# prlimit, setpriority, sched_setaffinity, sched_setscheduler and ioprio_set
# check, and Landlock has no hook for them. The exec tries each on PID 1,
# the harness (2) and the zygote (3), whose limits and scheduling every later
# exec would inherit, and on its process group and user, also with a pid
# whose high 32 bits are set (the kernel reads a pid_t). Its own process, its
# threads and its children must stay its own to change, by 0 or by id.
import resource, threading
NR_ioprio_set, NR_prlimit64 = 251, 302  # x86_64
IOPRIO_WHO_PROCESS, IOPRIO_WHO_PGRP, IOPRIO_WHO_USER = 1, 2, 3
IDLE = 3 << 13
reached = []
def attempt(what, fn):
    r = try_os(fn)
    if r != "EPERM":
        reached.append(f"{what}={r}")
limit = (ctypes.c_uint64 * 2)(4096, 4096)
for pid in (1, 2, 3):
    attempt(f"prlimit{pid}", lambda: resource.prlimit(pid, resource.RLIMIT_FSIZE, (4096, 4096)))
    for high in (pid | (1 << 32), pid | (0xffffffff << 32)):
        r = sys_call(NR_prlimit64, high, resource.RLIMIT_FSIZE, limit, None)
        if r != "EPERM":
            reached.append(f"prlimit{high:#x}={r}")
    attempt(f"nice{pid}", lambda: os.setpriority(os.PRIO_PROCESS, pid, 5))
    attempt(f"affinity{pid}", lambda: os.sched_setaffinity(pid, {0}))
    attempt(f"sched{pid}", lambda: os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0)))
    r = sys_call(NR_ioprio_set, IOPRIO_WHO_PROCESS, pid, IDLE)
    if r != "EPERM":
        reached.append(f"ioprio{pid}={r}")
attempt("nice_pgrp", lambda: os.setpriority(os.PRIO_PGRP, 0, 12))
attempt("nice_user", lambda: os.setpriority(os.PRIO_USER, 0, 12))
for who, name in ((IOPRIO_WHO_PGRP, "ioprio_pgrp"), (IOPRIO_WHO_USER, "ioprio_user")):
    r = sys_call(NR_ioprio_set, who, 0, IDLE)
    if r != "EPERM":
        reached.append(f"ioprio{name}={r}")
# Its own: by 0, by its pid, by a thread's id, and a child's.
me, tid = os.getpid(), threading.get_native_id()
child = os.fork()
if child == 0:
    import time
    time.sleep(5)
    os._exit(0)
# Only ever raising the nice value (lowering it needs CAP_SYS_NICE), from
# wherever the worker started (a supervisor run under `nice` passes its own).
base = os.getpriority(os.PRIO_PROCESS, 0)
own = [try_os(lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0))),
       try_os(lambda: resource.prlimit(me, resource.RLIMIT_CORE, (0, 0))),
       try_os(lambda: os.setpriority(os.PRIO_PROCESS, 0, min(19, base + 1))),
       try_os(lambda: os.setpriority(os.PRIO_PROCESS, tid, min(19, base + 2))),
       try_os(lambda: os.setpriority(os.PRIO_PROCESS, child, min(19, base + 3))),
       try_os(lambda: os.sched_setaffinity(0, os.sched_getaffinity(0))),
       try_os(lambda: os.sched_setaffinity(me, os.sched_getaffinity(0))),
       try_os(lambda: os.sched_setscheduler(child, os.SCHED_BATCH, os.sched_param(0))),
       sys_call(NR_ioprio_set, IOPRIO_WHO_PROCESS, 0, IDLE),
       sys_call(NR_ioprio_set, IOPRIO_WHO_PROCESS, me, IDLE)]
os.kill(child, 9)
os.waitpid(child, 0)
print("pid", me, "reached:", reached, "own:", own)
verdict("refused" if not reached and own == ["ok"] * len(own) else
        "reached " + ",".join(reached) + " own " + ",".join(own))
