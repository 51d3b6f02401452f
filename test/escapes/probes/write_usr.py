# Write into a read-only system directory.
verdict(try_os(lambda: open("/usr/bin/castellan-probe", "w")))
