# Replace the harness (bound read-only).
verdict(try_os(lambda: open("/opt/castellan/python/castellan_harness.py", "a")))
