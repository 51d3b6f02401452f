# Read the host's password hashes.
verdict(try_os(lambda: open("/etc/shadow").read()))
