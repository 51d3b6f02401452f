# A POSIX message queue would outlive the exec in the worker's IPC
# namespace (nothing lists them without an mqueue mount): creating one must
# fail.
rt = ctypes.CDLL("librt.so.1", use_errno=True)
q = rt.mq_open(b"/castellan", os.O_CREAT | os.O_RDWR, 0o600, None)
verdict("ok" if q >= 0 else errname(ctypes.get_errno()))
