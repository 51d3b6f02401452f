# Run a denied program through the dynamic loader as a program:
# ld.so /usr/bin/dash. See docs/security.md ("Exec rules"): the kernel opens
# an allowed program's ELF interpreter exactly as it opens a program, so the
# loader keeps Landlock EXECUTE, and what it runs is any file on a mount
# that allows mapping it executable, as code could map it in-process itself.
verdict(try_exec(lambda: os.execv("/lib64/ld-linux-x86-64.so.2",
                                  ["ld.so", "/usr/bin/dash", "-c", "echo ran"])))
