# Fork mode, two execs on one worker: System V shared memory (with a
# secret in it), a semaphore set and a message queue made by the first must
# be gone for the second (the worker's IPC namespace outlives each exec).
IPC_PRIVATE, IPC_CREAT = 0, 0o1000
if PHASE == 1:
    shm = libc.shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0o600)
    libc.shmat.restype = ctypes.c_void_p
    addr = libc.shmat(shm, None, 0)
    ctypes.memmove(addr, b"castellan-secret", 16)
    libc.shmdt(ctypes.c_void_p(addr))
    libc.semget(IPC_PRIVATE, 1, IPC_CREAT | 0o600)
    libc.msgget(IPC_PRIVATE, IPC_CREAT | 0o600)
    verdict("planted")
else:
    buf = ctypes.create_string_buffer(256)
    counts = []
    libc.shmctl(0, 14, buf)  # SHM_INFO: used_ids first
    counts.append(ctypes.c_int.from_buffer(buf, 0).value)
    libc.semctl(0, 0, 19, buf)  # SEM_INFO: semusz at 28
    counts.append(ctypes.c_int.from_buffer(buf, 28).value)
    libc.msgctl(0, 12, buf)  # MSG_INFO: msgpool first
    counts.append(ctypes.c_int.from_buffer(buf, 0).value)
    verdict("empty" if counts == [0, 0, 0] else "found:" + ",".join(map(str, counts)))
