# Fork mode under a policy whose opens the supervisor decides (and performs):
# open the harness's, the zygote's and PID 1's /proc entries that any
# process may read (maps, status) through the supervisor, which passes the
# kernel's ptrace-mode checks with its own rights.
names = [f"/proc/{pid}/{entry}" for pid in (1, 2, os.getppid()) for entry in ("maps", "status")]
verdict(",".join(sorted({try_os(lambda p=p: os.close(os.open(p, os.O_RDONLY))) for p in names})))
