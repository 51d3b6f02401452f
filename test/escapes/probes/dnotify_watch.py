# dnotify is inotify's older door (fcntl F_NOTIFY): a watch on a directory of
# the read-only binds, the host's inodes, would show what other workers
# open. Refused by the seccomp filter.
import fcntl
fd = os.open("/usr/lib", os.O_RDONLY | os.O_DIRECTORY)
verdict(try_os(lambda: fcntl.fcntl(fd, fcntl.F_NOTIFY, fcntl.DN_ACCESS | fcntl.DN_MULTISHOT)))
