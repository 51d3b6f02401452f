# kill(-1, SIGKILL): everything the process can signal.
import signal
verdict(try_os(lambda: os.kill(-1, signal.SIGKILL)))
