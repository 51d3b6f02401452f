# A setuid-root program planted in the workspace (the sandbox's uid owns
# the file, so chmod works): the bit must mean nothing when it runs.
import shutil
shutil.copy("/usr/bin/id", "/workspace/id")
try:
    os.chmod("/workspace/id", 0o4755)
except OSError as e:
    verdict("chmod " + errname(e.errno))
else:
    verdict(try_exec(lambda: os.execv("/workspace/id", ["id", "-u"])))
