# Fork until the kernel refuses.
import time
n = 0
res = "ok"
for i in range(10000):
    try:
        pid = os.fork()
    except OSError as e:
        res = errname(e.errno)
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    n += 1
print("forked", n)
verdict(res)
