# Fork mode: signal the zygote (the exec's parent) and the harness.
verdict(",".join(sorted({try_os(lambda: os.kill(os.getppid(), 0)), try_os(lambda: os.kill(2, 0))})))
