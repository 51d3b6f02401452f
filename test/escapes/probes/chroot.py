# chroot (the classic escape with a held directory fd).
verdict(sys_call(161, b"/tmp"))
