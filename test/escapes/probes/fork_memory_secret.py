# Fork mode, two execs on one worker. The first builds a secret, prints it
# and raises it; its source also differs from the second's (the runner puts
# "PHASE = 1" or "PHASE = 2" before this text); the runner gives it an
# environment variable and stdin that are secrets too, which it reads. The
# second, forked from the same zygote, searches all of its own memory (what
# it inherited) for the secret, the first exec's source, its variable and
# its stdin, and the contents of the file it was given (files_in) and of
# the file it left to be read back (files_out). None is ever built in one
# piece by the second exec: it looks for a first half followed by a second.
import os
import sys

PAIRS = [("castellan-secret-", "5f0d7c2a9e41b8"), ("PHASE = ", "1\n# Fork mode, two execs"),
         ("castellan-env-", "a61f93d0c4"), ("castellan-stdin-", "2c7be95140"),
         ("castellan-file-in-", "7e03b1c95d"), ("castellan-file-out-", "e4a8c2106f")]
NAMES = ("secret", "code", "env", "stdin", "file_in", "file_out")
if PHASE == 1:
    secret = PAIRS[0][0] + PAIRS[0][1]
    print(secret, os.environ.get("CASTELLAN_PROBE"), sys.stdin.read(), os.getcwd())
    # The runner's files_in holds a secret, and its files_out reads this
    # one back: the zygote writes the first and reads the second.
    if os.path.exists("/tmp/probe-in"):
        print(open("/tmp/probe-in").read())
        with open("/tmp/probe-out", "w") as f:
            f.write(PAIRS[5][0])
            f.write(PAIRS[5][1])
    raise RuntimeError(secret)
if "CASTELLAN_PROBE" in os.environ or os.getcwd() == "/usr":
    verdict("inherited the first exec's environment or directory")
    raise SystemExit(0)
found = []
CHUNK = 8 << 20
overlap = max(len(a) + len(b) for a, b in PAIRS)
maps = open("/proc/self/maps").read().splitlines()
with open("/proc/self/mem", "rb", buffering=0) as mem:
    for line in maps:
        fields = line.split()
        if "r" not in fields[1] or (len(fields) > 5 and fields[5] in ("[vvar]", "[vsyscall]")):
            continue
        lo, hi = (int(x, 16) for x in fields[0].split("-"))
        if hi - lo > 1 << 30:
            # An address-space reservation (an AddressSanitizer build's
            # shadow memory), not where an interpreter in a 128 MiB cgroup
            # keeps its objects.
            continue
        # In pieces, overlapping by a pair's length: memory stays bounded.
        at = lo
        while at < hi:
            try:
                mem.seek(at)
                data = mem.read(min(CHUNK + overlap, hi - at))
            except (OSError, OverflowError, ValueError):
                break
            for n, (a, b) in enumerate(PAIRS):
                a, b = a.encode(), b.encode()
                i = data.find(a)
                while i >= 0:
                    if data[i + len(a):i + len(a) + len(b)] == b:
                        found.append(NAMES[n])
                    i = data.find(a, i + 1)
            del data
            at += CHUNK
verdict("clean" if not found else "found:" + ",".join(sorted(set(found))))
