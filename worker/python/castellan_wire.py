"""The worker end of the castellan wire (docs/wire.md): the segment, both
rings and both doorbells. Pure stdlib.

Memory ordering: the index words are read and written through
memoryviews cast to "I" (one aligned 4-byte load or store each), and the
data through memoryview slices (memcpy). On x86-64 (TSO) stores are not
reordered with stores nor loads with loads, and the interpreter cannot reorder
across these C calls, so "write data, then store tail" and "load tail, then
read data" give the release/acquire pairs the wire needs. A weakly ordered
CPU would need explicit fences here.
"""

import _thread
import mmap
import os
import select
import struct
import time

MAGIC = 0x4C545343
VERSION = 1
HEADER_SIZE = 4096
MIN_CAPACITY = 4096
MAX_CAPACITY = 64 << 20

TO_WORKER_HEAD = 64
TO_WORKER_TAIL = 128
TO_SUPERVISOR_HEAD = 192
TO_SUPERVISOR_TAIL = 256

FRAME_HEADER = struct.Struct("<IBI")
FRAME_HEADER_SIZE = 9
FRAME_MIN_LEN = 5
MASK32 = 0xFFFFFFFF

# Message types.
STDOUT = 0x00
FS_READ = 0x01
FS_WRITE = 0x02
NET_CONNECT = 0x03
EXEC = 0x04
LISTDIR = 0x05
STDERR = 0x06
RESULT = 0x07
READY = 0x08
STATE = 0x09
WARN = 0x0A
FILE = 0x0B
ALLOW = 0x10
DENY = 0x11
WARN_ALLOW = 0x12
CODE = 0x20
COMMAND = 0x21
SHUTDOWN = 0x22
TIGHTEN = 0x23
SETUP = 0x24

#: What the supervisor may send; anything else on to_worker is a broken wire.
SUPERVISOR_TYPES = frozenset({ALLOW, DENY, WARN_ALLOW, CODE, COMMAND, SHUTDOWN, TIGHTEN,
                              SETUP})

#: The largest STDOUT/STDERR frame payload the worker sends.
STREAM_CHUNK = 64 * 1024

_ONE = (1).to_bytes(8, "little")


class WireError(Exception):
    """The wire is broken: an impossible index or frame, or a dead doorbell."""


class Segment:
    """The mapped memfd; validates the header exactly as the C++ side does."""

    def __init__(self, fd):
        try:
            size = os.fstat(fd).st_size
            header = os.pread(fd, 12, 0)
        except OSError as e:
            raise WireError(f"segment fd {fd}: {e.strerror}") from None
        if len(header) != 12:
            raise WireError(f"segment of {size} bytes is too small for its header")
        magic, version, capacity = struct.unpack("<III", header)
        if magic != MAGIC:
            raise WireError(f"segment magic {magic:#x} is not {MAGIC:#x}")
        if version != VERSION:
            raise WireError(f"segment layout version {version} is not supported")
        if not (MIN_CAPACITY <= capacity <= MAX_CAPACITY) or capacity & (capacity - 1):
            raise WireError(f"segment ring capacity {capacity} is not a power of two in range")
        if size != HEADER_SIZE + 2 * capacity:
            raise WireError(f"segment is {size} bytes, capacity {capacity} needs "
                            f"{HEADER_SIZE + 2 * capacity}")
        self.capacity = capacity
        self.map = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        view = memoryview(self.map)
        self.to_worker_data = view[HEADER_SIZE:HEADER_SIZE + capacity]
        self.to_supervisor_data = view[HEADER_SIZE + capacity:HEADER_SIZE + 2 * capacity]

    def word(self, offset):
        """A one-element uint32 view of the index word at `offset`: `w[0]`
        is a single aligned 4-byte access (memoryview copies items with a
        fixed-size memcpy)."""
        return memoryview(self.map)[offset:offset + 4].cast("I")


class RingReader:
    """Consumer of to_worker. Our head is authoritative; the tail is validated.

    A frame's bytes are zeroed in the ring before its space is released: the
    ring never holds an earlier exec's code once the harness has taken it."""

    def __init__(self, data, capacity, head_word, tail_word):
        self._data = data
        self._capacity = capacity
        self._head_word = head_word
        self._tail_word = tail_word
        self._head = head_word[0]
        self._zeros = b""

    def _copy(self, pos, n, into=None):
        """`n` bytes from ring position `pos` (wrapping), as bytes, or into
        the bytearray `into` (of length `n`)."""
        cap = self._capacity
        off = pos & (cap - 1)
        first = min(n, cap - off)
        if into is not None:
            into[0:first] = self._data[off:off + first]
            if first < n:
                into[first:n] = self._data[0:n - first]
            return into
        if first == n:
            return bytes(self._data[off:off + n])
        return bytes(self._data[off:cap]) + bytes(self._data[0:n - first])

    def _zero(self, pos, n):
        """Overwrites `n` bytes from ring position `pos` (wrapping) with
        zeros; the consumer owns them until it publishes its new head."""
        if len(self._zeros) < n:
            self._zeros = bytes(n)
        cap = self._capacity
        off = pos & (cap - 1)
        first = min(n, cap - off)
        zeros = memoryview(self._zeros)
        self._data[off:off + first] = zeros[:first]
        if first < n:
            self._data[0:n - first] = zeros[:n - first]

    def read(self):
        """The next frame as (type, request_id, payload), or None when the
        ring is empty. The payload of a CODE or SETUP frame is a bytearray,
        so that its reader can overwrite it once used (see scrub()); any other is
        bytes. Raises WireError for anything impossible."""
        cap = self._capacity
        tail = self._tail_word[0]
        used = (tail - self._head) & MASK32
        if used == 0:
            return None
        if used > cap:
            raise WireError(f"to_worker holds {used} bytes but its capacity is {cap}")
        if used < FRAME_HEADER_SIZE:
            raise WireError(f"to_worker holds {used} bytes, less than a frame header")
        length, mtype, request_id = FRAME_HEADER.unpack(self._copy(self._head, FRAME_HEADER_SIZE))
        if length < FRAME_MIN_LEN:
            raise WireError(f"frame len {length} is below the minimum of 5")
        if 4 + length > cap:
            raise WireError(f"frame len {length} exceeds the ring capacity {cap}")
        if 4 + length > used:
            raise WireError(f"frame len {length} exceeds the {used} bytes published")
        if mtype not in SUPERVISOR_TYPES:
            raise WireError(f"frame type {mtype:#04x} is not one the supervisor sends")
        size = length - FRAME_MIN_LEN
        if mtype == CODE or mtype == SETUP:
            payload = self._copy(self._head + FRAME_HEADER_SIZE, size, bytearray(size))
        else:
            payload = self._copy(self._head + FRAME_HEADER_SIZE, size)
        self._zero(self._head, 4 + length)
        self._head = (self._head + 4 + length) & MASK32
        self._head_word[0] = self._head
        return mtype, request_id, payload


def scrub(buffer):
    """Overwrites a bytearray (a CODE payload, once used) with zeros, in
    place: the bytes are gone from this process's heap, not just freed."""
    if buffer:
        memoryview(buffer)[:] = bytes(len(buffer))


class RingWriter:
    """Producer of to_supervisor. Our tail is re-read from the segment on
    every write (only we write it), so that an exception between the data copy
    and the publishing store can never leave a stale private copy behind: the
    single store of the new tail is the commit point."""

    def __init__(self, data, capacity, head_word, tail_word):
        self._data = data
        self._capacity = capacity
        self.capacity = capacity
        self._head_word = head_word
        self._tail_word = tail_word
        self.max_payload = capacity - FRAME_HEADER_SIZE

    def _put(self, pos, chunk):
        cap = self._capacity
        n = len(chunk)
        off = pos & (cap - 1)
        first = min(n, cap - off)
        self._data[off:off + first] = chunk[:first]
        if first < n:
            self._data[0:n - first] = chunk[first:]

    def free(self):
        used = (self._tail_word[0] - self._head_word[0]) & MASK32
        if used > self._capacity:
            raise WireError(f"to_supervisor holds {used} bytes but its capacity is "
                            f"{self._capacity}")
        return self._capacity - used

    def try_write(self, mtype, request_id, payload):
        """Writes one frame if it fits now; False if the ring is too full."""
        payload = memoryview(payload).cast("B")
        size = FRAME_HEADER_SIZE + len(payload)
        if size > self._capacity:
            raise ValueError(f"frame of {size} bytes can never fit a ring of {self._capacity}")
        tail = self._tail_word[0]
        if size > self.free():
            return False
        self._put(tail, FRAME_HEADER.pack(FRAME_MIN_LEN + len(payload), mtype, request_id))
        self._put(tail + FRAME_HEADER_SIZE, payload)
        self._tail_word[0] = (tail + size) & MASK32
        return True


class Doorbell:
    """One eventfd (non-blocking, opened by the supervisor)."""

    def __init__(self, fd):
        self.fd = fd
        self._poll = select.poll()
        self._poll.register(fd, select.POLLIN)

    def ring(self):
        try:
            os.write(self.fd, _ONE)
        except BlockingIOError:
            # The counter is saturated, hence readable: the other side will
            # wake up anyway.
            pass
        except OSError as e:
            raise WireError(f"doorbell {self.fd}: {e.strerror}") from None

    def wait(self, timeout_ms):
        """Polls (timeout in ms, None for ever) and clears the counter.
        True if it had been rung."""
        events = self._poll.poll(timeout_ms)
        if not events:
            return False
        for _, revents in events:
            if revents & (select.POLLNVAL | select.POLLERR | select.POLLHUP):
                raise WireError(f"doorbell {self.fd} is closed or broken")
        try:
            os.read(self.fd, 8)
        except BlockingIOError:
            pass
        except OSError as e:
            raise WireError(f"doorbell {self.fd}: {e.strerror}") from None
        return True


class Wire:
    """Both rings and doorbells of one worker, safe to send on from several
    threads (stdout, stderr and the fd pumps all produce frames); frames are
    received by the main thread only.

    Waiting on the to_worker doorbell is shared: whoever waits first polls
    it, and every wake-up bumps a generation number that all waiters watch.
    So a thread that waits for ring space can never swallow the wake-up that
    tells the main thread a new request arrived (a waiter reads the
    generation *before* it checks its ring, and any later ring bumps it)."""

    def __init__(self, segment_fd, to_worker_fd, to_supervisor_fd, on_broken=None):
        self.segment = Segment(segment_fd)
        cap = self.segment.capacity
        seg = self.segment
        self.reader = RingReader(seg.to_worker_data, cap, seg.word(TO_WORKER_HEAD),
                                 seg.word(TO_WORKER_TAIL))
        self.writer = RingWriter(seg.to_supervisor_data, cap, seg.word(TO_SUPERVISOR_HEAD),
                                 seg.word(TO_SUPERVISOR_TAIL))
        self.in_bell = Doorbell(to_worker_fd)
        self.out_bell = Doorbell(to_supervisor_fd)
        self.chunk = min(STREAM_CHUNK, self.writer.max_payload)
        self._on_broken = on_broken
        #: The current request's output is streamed: ring for every chunk.
        self.stream_output = False
        self._send_lock = _thread.allocate_lock()
        self._sender = None
        self._deferred = []
        # Created by the first wait (_condition): importing threading costs
        # ~6 ms of start-up, and nothing waits before the harness is READY.
        self._bell_cv = None
        self._bell_cv_init = _thread.allocate_lock()
        self._bell_generation = 0
        self._bell_polling = False

    # --- failure ---------------------------------------------------------

    def broken(self, message):
        """Reports a broken wire. The harness installs a handler that exits
        the process (exit 3), so that user code can never catch it."""
        if self._on_broken is not None:
            self._on_broken(message)
        raise WireError(message)

    # --- the to_worker doorbell, shared between waiters --------------------

    def _condition(self):
        """The doorbell's condition variable, made once by whichever thread
        waits first."""
        cv = self._bell_cv
        if cv is None:
            with self._bell_cv_init:
                if self._bell_cv is None:
                    import threading
                    self._bell_cv = threading.Condition(_thread.allocate_lock())
                cv = self._bell_cv
        return cv

    def _wait_bell(self, generation, timeout):
        """Returns once the doorbell generation differs from `generation`,
        or after `timeout` seconds (None: no limit)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        cv = self._condition()
        with cv:
            while self._bell_generation == generation:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return
                if self._bell_polling:
                    cv.wait(remaining)
                    continue
                self._bell_polling = True
                cv.release()
                fired = False
                try:
                    ms = -1 if remaining is None else max(1, int(remaining * 1000))
                    try:
                        fired = self.in_bell.wait(ms)
                    except WireError as e:
                        self.broken(str(e))
                finally:
                    cv.acquire()
                    self._bell_polling = False
                    if fired:
                        self._bell_generation += 1
                    # Wake everyone: the generation moved, or another waiter
                    # has to take over polling.
                    cv.notify_all()

    # --- receiving (main thread) -------------------------------------------

    def receive(self, block=True):
        """The next frame from the supervisor, waiting for it if `block`."""
        while True:
            generation = self._bell_generation
            try:
                frame = self.reader.read()
            except WireError as e:
                self.broken(str(e))
            if frame is not None or not block:
                return frame
            self._wait_bell(generation, None)

    # --- sending -------------------------------------------------------------

    def send(self, mtype, request_id, payload):
        """Sends one frame (payload at most writer.max_payload bytes), waiting
        for space while the ring is full."""
        self._exclusive(self._send_one, mtype, request_id, payload)

    def send_stream(self, mtype, request_id, data):
        """Sends bytes as STDOUT/STDERR frames of at most `chunk` bytes. The
        chunks of one call stay contiguous on the wire."""
        self._exclusive(self._send_chunks, mtype, request_id, data)

    def _exclusive(self, operation, mtype, request_id, data):
        me = _thread.get_ident()
        if self._sender == me:
            # Re-entered on the sending thread, e.g. a finalizer flushing an
            # old stdout writer while a frame is half-written: interleaving
            # would corrupt the ring, so this waits for the outer send.
            self._deferred.append((operation, mtype, request_id, bytes(data)))
            return
        with self._send_lock:
            self._sender = me
            try:
                operation(mtype, request_id, data)
                while self._deferred:
                    deferred = self._deferred.pop(0)
                    deferred[0](*deferred[1:])
            finally:
                self._sender = None

    def _send_one(self, mtype, request_id, payload, urgent=True):
        """Writes one frame. Output chunks are not `urgent`: the supervisor
        only needs them by the RESULT that follows, so the doorbell is rung
        for them only once the ring is half full — one wake-up per request
        instead of one per chunk — unless the request's output is streamed
        (`stream_output`, from its SETUP), when each is rung for at once."""
        delay = 0.001
        while True:
            generation = self._bell_generation
            try:
                written = self.writer.try_write(mtype, request_id, payload)
                if (urgent or self.stream_output or not written or
                        self.writer.free() < self.writer.capacity // 2):
                    self.out_bell.ring()
            except WireError as e:
                self.broken(str(e))
            if written:
                return
            # Full: the supervisor was just rung; wait for it to ring back,
            # re-checking now and then in case it frees space without ringing.
            self._wait_bell(generation, delay)
            delay = min(delay * 2, 0.05)

    def _send_chunks(self, mtype, request_id, data):
        view = memoryview(data).cast("B")
        for start in range(0, len(view), self.chunk):
            self._send_one(mtype, request_id, view[start:start + self.chunk], urgent=False)
