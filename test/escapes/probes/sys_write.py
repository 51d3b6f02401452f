# Write a kernel tunable under /sys.
verdict(try_os(lambda: open("/sys/kernel/mm/transparent_hugepage/enabled", "w").write("never")))
