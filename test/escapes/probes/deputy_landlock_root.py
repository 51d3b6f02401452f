# The worker's Landlock rules grant no right on the root directory itself
# (only on /usr, /tmp, /proc...): listing it is refused. The supervisor opens
# it for the worker under a mediating policy and must refuse the same.
verdict(try_os(lambda: os.listdir("/")))
