# A symlink in /tmp pointing at a host secret.
os.symlink("/etc/shadow", "/tmp/shadow-link")
verdict(try_os(lambda: open("/tmp/shadow-link").read()))
