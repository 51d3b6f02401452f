# A device node (/dev/null's numbers) made in the workspace.
import stat
verdict(try_os(lambda: os.mknod("/workspace/null", stat.S_IFCHR | 0o666, os.makedev(1, 3))))
