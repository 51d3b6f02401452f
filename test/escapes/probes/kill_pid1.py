# Signal castellan-worker (PID 1).
import signal
verdict(try_os(lambda: os.kill(1, signal.SIGTERM)))
