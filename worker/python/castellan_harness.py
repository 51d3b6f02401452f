"""castellan_harness: the interpreter side of a castellan worker.

Started by castellan-worker as

    python3 -I -S -B castellan_harness.py --segment-fd N --to-worker-fd N
            --to-supervisor-fd N [--mode reuse|fork|oneshot|session] [--control-fd N]

This file is only the entry point: Python compiles a script it runs on every
start, but loads an imported module from its cached bytecode (__pycache__,
written at build time), so the body lives in castellan_runtime.
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
# -I keeps the script's directory out of sys.path; it is added for our own
# modules only, so that user code sees the interpreter's normal path.
sys.path.insert(0, _HERE)
try:
    import castellan_runtime
finally:
    sys.path.remove(_HERE)

if __name__ == "__main__":
    sys.exit(castellan_runtime.main(sys.argv[1:]))
