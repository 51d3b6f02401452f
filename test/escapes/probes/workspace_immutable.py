# Make a workspace file immutable (FS_IOC_SETFLAGS, FS_IMMUTABLE_FL), so
# that the host could not remove the workspace.
import fcntl, struct
fd = os.open("/workspace/pinned", os.O_CREAT | os.O_RDONLY, 0o644)
verdict(try_os(lambda: fcntl.ioctl(fd, 0x40086602, struct.pack("i", 0x10))))
