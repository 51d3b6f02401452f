# Fork mode: SIGKILL every process the exec may signal (kill(-1)), which
# would be its zygote and the harness if it could signal them (kill(-1)
# answers 0 even when every signal was refused, so the verdict is whether
# the zygote, its parent, is still there).
import signal, time
zygote = os.getppid()
try_os(lambda: os.kill(-1, signal.SIGKILL))
time.sleep(0.1)
verdict("zygote alive" if os.getppid() == zygote else "zygote killed")
