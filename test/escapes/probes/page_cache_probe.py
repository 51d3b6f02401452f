# The page cache of the host's files is every worker's: evicting a page
# (fadvise DONTNEED) and then asking whether it is cached again without
# reading it (preadv2 RWF_NOWAIT answers EAGAIN for a page that is not)
# shows which files another worker reads. The eviction is answered but does
# nothing; the question is refused.
import sys
path = sys.executable
fd = os.open(path, os.O_RDONLY)
os.pread(fd, 4096, 0)  # cached now
advise = try_os(lambda: os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED))
buf = bytearray(4096)
nowait = try_os(lambda: os.preadv(fd, [buf], 0, os.RWF_NOWAIT))
print("fadvise", advise, "preadv2 nowait", nowait)
verdict(nowait if advise == "ok" else "fadvise " + advise)
