# Run a copy of a denied program from a memfd: no path Landlock could refuse
# EXECUTE on, on no mount that could be noexec (vm.memfd_noexec = 2).
verdict(try_exec(lambda: os.execve(copy_to_memfd("/usr/bin/dash"), SHELL_RAN, {})))
