# A symlink in /tmp pointing at a host secret. strict.json lets nothing be
# written, so the link is refused first (EACCES); where it can be made, the
# secret behind it is not in the sandbox (ENOENT).
made = try_os(lambda: os.symlink("/etc/shadow", "/tmp/shadow-link"))
verdict(made if made != "ok" else try_os(lambda: open("/tmp/shadow-link").read()))
