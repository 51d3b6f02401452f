# The sandbox's /dev nodes are the host's inodes, which every worker and the
# host share: setting their times (to now needs only write access to the
# node) would be a channel between workers. The bind is read-only (writing
# the device, where the policy allows it, still works: the conformance test
# writes /dev/null under every policy).
print("open for writing:", try_os(lambda: os.close(os.open("/dev/null", os.O_WRONLY))))
verdict(try_os(lambda: os.utime("/dev/null")))
