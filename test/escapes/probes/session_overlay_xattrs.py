# A session's overlay keeps its metadata in user.overlay.* extended
# attributes (userxattr), and hostile code may set user.* on what it writes.
# The kernel escapes them (they land as user.overlay.overlay.* in the upper
# layer): forging opaque, redirect, whiteout or metacopy changes nothing.
# HOST (overlaid) has sub/a and other/b on the host. PHASE 1 forges, PHASE 2
# (a later exec of the same session) looks.
if PHASE == 1:
    os.setxattr(HOST + "/sub", "user.overlay.opaque", b"y")
    os.mkdir(HOST + "/newd")
    os.setxattr(HOST + "/newd", "user.overlay.redirect", b"/other")
    os.setxattr(HOST + "/newd", "user.overlay.opaque", b"x")
    open(HOST + "/wf", "w").close()
    os.setxattr(HOST + "/wf", "user.overlay.whiteout", b"")
    os.setxattr(HOST, "user.overlay.whiteouts", b"")
    os.setxattr(HOST + "/wf", "user.overlay.metacopy", b"")
    verdict("planted " + try_os(lambda: os.setxattr(HOST + "/sub", "trusted.overlay.opaque", b"y")))
else:
    verdict(" ".join([
        ",".join(sorted(os.listdir(HOST + "/sub"))) or "-",   # opaque ignored: a
        ",".join(sorted(os.listdir(HOST + "/newd"))) or "-",  # redirect ignored: -
        "wf" if "wf" in os.listdir(HOST) else "gone",          # whiteout ignored: wf
        str(os.stat(HOST + "/wf").st_size),                    # metacopy ignored: 0
    ]))
