# files_out through a working directory in /proc: the process that reads
# the files back serves the exec (the harness, the zygote), and its own
# /proc entries (environ, mem, maps) must not be what comes back. The
# runner asks for self/environ, self/mem, self/maps, thread-self/environ,
# 1/environ, 2/environ and 3/environ relative to cwd /proc and checks that
# none comes back: /proc/self is a symlink, the processes that serve the
# exec are hidden or not readable, and a process's own entries (the harness
# in shared mode is PID 2) are refused for being on procfs.
verdict("ran")
