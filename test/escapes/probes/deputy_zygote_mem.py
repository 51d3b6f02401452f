# Fork mode: PID 2 is the zygote that forks every later exec. Make the
# supervisor open its memory for writing (a patch there runs in every
# later exec).
if os.getpid() == 2:
    verdict("caller is pid 2")
else:
    verdict(try_os(lambda: os.close(os.open("/proc/2/mem", os.O_RDWR))))
