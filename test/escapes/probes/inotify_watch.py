# The binds of /usr and /etc are the host's inodes, which other workers open
# too: an inotify (or fanotify) watch on them would show what other tenants
# import. Refused by the seccomp filter.
NR_inotify_init1, NR_inotify_init = 294, 253  # x86_64
a = sys_call(NR_inotify_init1, 0)
b = sys_call(NR_inotify_init)
verdict(a if a == b else a + "/" + b)
