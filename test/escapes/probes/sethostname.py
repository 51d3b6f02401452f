# Change the hostname.
verdict(sys_call(170, b"evil", 4))
