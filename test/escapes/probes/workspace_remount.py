# Remount the workspace executable (MS_REMOUNT | MS_BIND, no MS_NOEXEC).
verdict(sys_call(165, None, b"/workspace", None, 0x20 | 0x1000, None))
