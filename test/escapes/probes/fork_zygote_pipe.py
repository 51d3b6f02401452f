# Fork mode, two execs on one worker. The first writes a forged request
# (the zygote's framing: lengths, then code) into every pipe the zygote
# holds but stdio, through /proc/<zygote>/fd: the zygote would run it as the
# next exec and answer the wrong request from then on. The second exec must
# get its own output.
import struct
if PHASE == 1:
    forged = b'print("verdict: hijacked")\n'
    def inject():
        zygote = os.getppid()
        for fd in os.listdir(f"/proc/{zygote}/fd"):
            if int(fd) > 2 and os.readlink(f"/proc/{zygote}/fd/{fd}").startswith("pipe:"):
                try:
                    w = os.open(f"/proc/{zygote}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
                except OSError:
                    continue
                for header in (struct.pack("<II", len(forged), 0),
                               struct.pack("<III", 0, len(forged), 0)):
                    try:
                        os.write(w, header + forged)
                    except OSError:
                        pass
                os.close(w)
    verdict(try_os(inject))
else:
    verdict("own")
