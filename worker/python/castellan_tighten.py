"""castellan_tighten: narrows the process of one exec to a stricter policy.

In fork mode the supervisor may run a request whose policy is stricter than
the pool's on the pool's warm zygote. It then sends a TIGHTEN frame (JSON,
docs/wire.md) before the CODE frame, and the process forked for that CODE is
narrowed before any of the code runs:

- an additional Landlock ruleset (the rules the request policy's own pool
  would have had), with the same ABI handling as
  platform/linux/landlock.cpp;
- an additional seccomp filter, a classic-BPF program built by the
  supervisor (libseccomp), installed with prctl(PR_SET_SECCOMP).

Both only ever take rights away: a process cannot leave a Landlock domain or
remove a seccomp filter, and the kernel intersects every layer.

The work is split so that the child does as little as possible (every page
it touches after the fork is copied): the zygote validates the description
(`parse`) and builds the ruleset and the filter (`prepare`) right before the
fork; the child only enforces them (`in_child`: no_new_privs,
landlock_restrict_self, closing the ruleset, PR_SET_SECCOMP) and reports.
The zygote closes its copy of the ruleset right after the fork, so no other
exec's process ever holds it (a process holding a ruleset could add rules to
it). Anything that cannot be done exactly as described raises
TighteningError in the zygote, or makes the child exit without running the
code (fail closed).
"""

import base64
import binascii
import ctypes
import json
import os
import stat
import time

VERSION = 1

# Landlock (include/uapi/linux/landlock.h). The syscall numbers are the same
# on every architecture (they were added after the tables were unified).
SYS_LANDLOCK_CREATE_RULESET = 444
SYS_LANDLOCK_ADD_RULE = 445
SYS_LANDLOCK_RESTRICT_SELF = 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
LANDLOCK_RULE_NET_PORT = 2

FS_RIGHTS = ("execute", "write_file", "read_file", "read_dir", "remove_dir", "remove_file",
             "make_char", "make_dir", "make_reg", "make_sock", "make_fifo", "make_block",
             "make_sym", "refer", "truncate", "ioctl_dev")
NET_RIGHTS = ("bind_tcp", "connect_tcp")
SCOPES = ("abstract_unix_socket", "signal")
FS_ALL = (1 << len(FS_RIGHTS)) - 1
NET_ALL = (1 << len(NET_RIGHTS)) - 1
SCOPE_ALL = (1 << len(SCOPES)) - 1
FS_REFER = 1 << 13
FS_TRUNCATE = 1 << 14
FS_IOCTL_DEV = 1 << 15
#: What a rule on a file (not a directory) may carry.
FS_FILE_RIGHTS = (1 << 0) | (1 << 1) | (1 << 2) | FS_TRUNCATE | FS_IOCTL_DEV

# prctl / seccomp (include/uapi/linux/prctl.h, seccomp.h, filter.h).
PR_SET_SECCOMP = 22
PR_SET_NO_NEW_PRIVS = 38
SECCOMP_MODE_FILTER = 2
BPF_MAXINSNS = 4096
SOCK_FILTER_SIZE = 8

#: Upper bounds on the description (a CODE frame carries the code; this
#: frame carries only rules).
MAX_PATH_RULES = 4096
MAX_PORT_RULES = 1024


class TighteningError(Exception):
    """The tightening cannot be applied as described: the code must not run."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64),
                ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _NetPortAttr(ctypes.Structure):
    _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


# Loaded in the zygote, so that the child opens no library after the fork.
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.prctl.restype = ctypes.c_int


def _errno_text():
    err = ctypes.get_errno()
    return f"{os.strerror(err)} (errno {err})"


def _names(table, mask):
    return [name for bit, name in enumerate(table) if mask & (1 << bit)]


# --- validation ---------------------------------------------------------------------


def _field(obj, key, kind, where):
    if key not in obj:
        raise TighteningError(f"{where}: '{key}' is missing")
    value = obj[key]
    # bool is an int in Python: never accept one for the other.
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise TighteningError(f"{where}: '{key}' is not an integer")
    if kind is not int and not isinstance(value, kind):
        raise TighteningError(f"{where}: '{key}' is not a {kind.__name__}")
    return value


def _only(obj, keys, where):
    extra = sorted(set(obj) - set(keys))
    if extra:
        raise TighteningError(f"{where}: unknown field(s) {', '.join(extra)}")


def _mask(obj, key, allowed, where):
    value = _field(obj, key, int, where)
    if value < 0 or value & ~allowed:
        raise TighteningError(f"{where}: '{key}' {value} names rights this harness does not know")
    return value


def parse(payload):
    """The TIGHTEN payload as a checked dict; TighteningError when anything
    in it is missing, of the wrong type, out of range or unknown."""
    try:
        spec = json.loads(bytes(payload).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise TighteningError(f"TIGHTEN payload is not JSON: {e}") from None
    if not isinstance(spec, dict):
        raise TighteningError("TIGHTEN payload is not a JSON object")
    _only(spec, ("version", "policy", "arch", "landlock", "seccomp"), "TIGHTEN")
    if _field(spec, "version", int, "TIGHTEN") != VERSION:
        raise TighteningError(f"TIGHTEN: version {spec['version']} is not {VERSION}")
    _field(spec, "policy", str, "TIGHTEN")
    _field(spec, "arch", str, "TIGHTEN")
    landlock = spec.get("landlock")
    if landlock is not None:
        where = "TIGHTEN landlock"
        if not isinstance(landlock, dict):
            raise TighteningError(f"{where}: not an object")
        _only(landlock, ("best_effort", "require_net", "handled_fs", "handled_net", "scoped",
                         "paths", "ports"), where)
        _field(landlock, "best_effort", bool, where)
        _field(landlock, "require_net", bool, where)
        _mask(landlock, "handled_fs", FS_ALL, where)
        _mask(landlock, "handled_net", NET_ALL, where)
        _mask(landlock, "scoped", SCOPE_ALL, where)
        paths = _field(landlock, "paths", list, where)
        if len(paths) > MAX_PATH_RULES:
            raise TighteningError(f"{where}: more than {MAX_PATH_RULES} path rules")
        for i, rule in enumerate(paths):
            w = f"{where} paths[{i}]"
            if not isinstance(rule, dict):
                raise TighteningError(f"{w}: not an object")
            _only(rule, ("path", "access", "optional"), w)
            path = _field(rule, "path", str, w)
            if not path.startswith("/") or "\0" in path:
                raise TighteningError(f"{w}: {path!r} is not an absolute path")
            _mask(rule, "access", FS_ALL, w)
            _field(rule, "optional", bool, w)
        ports = _field(landlock, "ports", list, where)
        if len(ports) > MAX_PORT_RULES:
            raise TighteningError(f"{where}: more than {MAX_PORT_RULES} port rules")
        for i, rule in enumerate(ports):
            w = f"{where} ports[{i}]"
            if not isinstance(rule, dict):
                raise TighteningError(f"{w}: not an object")
            _only(rule, ("port", "access"), w)
            port = _field(rule, "port", int, w)
            if not 0 <= port <= 65535:
                raise TighteningError(f"{w}: port {port} is out of range")
            _mask(rule, "access", NET_ALL, w)
    seccomp = spec.get("seccomp")
    if seccomp is not None:
        where = "TIGHTEN seccomp"
        if not isinstance(seccomp, dict):
            raise TighteningError(f"{where}: not an object")
        _only(seccomp, ("program", "denied", "killed"), where)
        try:
            program = base64.b64decode(_field(seccomp, "program", str, where), validate=True)
        except (binascii.Error, ValueError):
            raise TighteningError(f"{where}: 'program' is not base64") from None
        if not program or len(program) % SOCK_FILTER_SIZE \
                or len(program) // SOCK_FILTER_SIZE > BPF_MAXINSNS:
            raise TighteningError(f"{where}: a program of {len(program)} bytes is not "
                                  f"1..{BPF_MAXINSNS} instructions of {SOCK_FILTER_SIZE} bytes")
        seccomp["program"] = program
        for key in ("denied", "killed"):
            names = _field(seccomp, key, list, where)
            if not all(isinstance(n, str) for n in names):
                raise TighteningError(f"{where}: '{key}' is not a list of names")
    return spec


# --- preparation, in the zygote ------------------------------------------------------


def _landlock_abi():
    abi = _libc.syscall(ctypes.c_long(SYS_LANDLOCK_CREATE_RULESET), None, ctypes.c_long(0),
                        ctypes.c_long(LANDLOCK_CREATE_RULESET_VERSION))
    return 0 if abi < 0 else abi


def _rights_of_abi(abi):
    """(fs, net, scopes) the running kernel's Landlock ABI knows."""
    if abi < 1:
        return 0, 0, 0
    fs = (1 << 13) - 1
    if abi >= 2:
        fs |= FS_REFER
    if abi >= 3:
        fs |= FS_TRUNCATE
    if abi >= 5:
        fs |= FS_IOCTL_DEV
    return fs, NET_ALL if abi >= 4 else 0, SCOPE_ALL if abi >= 6 else 0


class Prepared:
    """A description made ready to enforce: the Landlock ruleset created and
    filled (an fd the zygote holds until it has forked), the seccomp program
    in a buffer, and the report of what they will do."""

    def __init__(self, spec):
        started = time.perf_counter_ns()
        self.ruleset = -1
        self.policy = spec["policy"]
        self.landlock_report = None
        self.seccomp_report = None
        self._fprog = None
        machine = os.uname().machine
        if spec["arch"] != machine:
            raise TighteningError(f"the seccomp program is for {spec['arch']}, "
                                  f"this is {machine}")
        try:
            if spec.get("landlock") is not None:
                self._prepare_landlock(spec["landlock"])
            if spec.get("seccomp") is not None:
                self._prepare_seccomp(spec["seccomp"])
        except BaseException:
            self.close()
            raise
        # The child's calls with their arguments built here: each object the
        # child creates or touches after the fork costs it a page copy.
        self._no_new_privs = (ctypes.c_int(PR_SET_NO_NEW_PRIVS), ctypes.c_ulong(1),
                              ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))
        self._restrict = (ctypes.c_long(SYS_LANDLOCK_RESTRICT_SELF), ctypes.c_long(self.ruleset),
                          ctypes.c_long(0))
        self._set_seccomp = None
        if self._fprog is not None:
            self._set_seccomp = (ctypes.c_int(PR_SET_SECCOMP), ctypes.c_ulong(SECCOMP_MODE_FILTER),
                                 ctypes.cast(ctypes.pointer(self._fprog), ctypes.c_void_p),
                                 ctypes.c_ulong(0), ctypes.c_ulong(0))
        self.report = {"policy": self.policy, "applied_in": "exec process",
                       "landlock": self.landlock_report, "seccomp": self.seccomp_report,
                       "prepare_us": (time.perf_counter_ns() - started) // 1000, "apply_us": 0}

    def close(self):
        """Closes the ruleset (the zygote, once it has forked; idempotent)."""
        if self.ruleset >= 0:
            os.close(self.ruleset)
            self.ruleset = -1

    def _prepare_landlock(self, spec):
        best_effort = spec["best_effort"]
        abi = _landlock_abi()
        report = {"abi": abi, "enforced": False}
        self.landlock_report = report
        if abi == 0:
            if best_effort and not spec["require_net"]:
                report["skipped"] = "the kernel has no Landlock"
                return
            raise TighteningError("Landlock: the kernel has no Landlock (or it is not an "
                                  "active LSM)")
        fs_ok, net_ok, scope_ok = _rights_of_abi(abi)
        dropped_fs = spec["handled_fs"] & ~fs_ok
        dropped_net = spec["handled_net"] & ~net_ok
        dropped_scoped = spec["scoped"] & ~scope_ok
        if spec["require_net"] and dropped_net:
            raise TighteningError(f"Landlock: ABI {abi} cannot restrict TCP, which this policy "
                                  f"needs (the pool's workers have network)")
        if not best_effort and (dropped_fs or dropped_net or dropped_scoped):
            missing = _names(FS_RIGHTS, dropped_fs) + _names(NET_RIGHTS, dropped_net) + \
                ["scope " + n for n in _names(SCOPES, dropped_scoped)]
            raise TighteningError(f"Landlock: the kernel's ABI {abi} lacks {','.join(missing)} "
                                  f"(best_effort is off)")
        handled_fs = spec["handled_fs"] & fs_ok
        handled_net = spec["handled_net"] & net_ok
        scoped = spec["scoped"] & scope_ok
        attr = _RulesetAttr(handled_fs, handled_net, scoped)
        size = 24 if abi >= 6 else 16 if abi >= 4 else 8
        ruleset = _libc.syscall(ctypes.c_long(SYS_LANDLOCK_CREATE_RULESET), ctypes.byref(attr),
                                ctypes.c_long(size), ctypes.c_long(0))
        if ruleset < 0:
            raise TighteningError(f"Landlock: landlock_create_ruleset: {_errno_text()}")
        self.ruleset = ruleset  # close-on-exec, as every Landlock ruleset fd
        path_rules = port_rules = 0
        skipped = []
        for rule in spec["paths"]:
            path = rule["path"]
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except FileNotFoundError:
                if rule["optional"]:
                    skipped.append(path)
                    continue
                raise TighteningError(f"Landlock: open(O_PATH) {path}: no such file") from None
            except OSError as e:
                raise TighteningError(f"Landlock: open(O_PATH) {path}: {e.strerror}") from None
            try:
                access = rule["access"] & handled_fs
                if not stat.S_ISDIR(os.fstat(fd).st_mode):
                    access &= FS_FILE_RIGHTS
                if access == 0:
                    continue  # nothing this ruleset handles
                attr_pb = _PathBeneathAttr(access, fd)
                if _libc.syscall(ctypes.c_long(SYS_LANDLOCK_ADD_RULE), ctypes.c_long(ruleset),
                                 ctypes.c_long(LANDLOCK_RULE_PATH_BENEATH),
                                 ctypes.byref(attr_pb), ctypes.c_long(0)) != 0:
                    raise TighteningError(f"Landlock: add rule {path} "
                                          f"({','.join(_names(FS_RIGHTS, access))}): "
                                          f"{_errno_text()}")
                path_rules += 1
            finally:
                os.close(fd)
        for rule in spec["ports"]:
            access = rule["access"] & handled_net
            if access == 0:
                continue
            attr_np = _NetPortAttr(access, rule["port"])
            if _libc.syscall(ctypes.c_long(SYS_LANDLOCK_ADD_RULE), ctypes.c_long(ruleset),
                             ctypes.c_long(LANDLOCK_RULE_NET_PORT), ctypes.byref(attr_np),
                             ctypes.c_long(0)) != 0:
                raise TighteningError(f"Landlock: add rule tcp port {rule['port']}: "
                                      f"{_errno_text()}")
            port_rules += 1
        report.update({
            "handled_fs": _names(FS_RIGHTS, handled_fs),
            "handled_net": _names(NET_RIGHTS, handled_net),
            "scoped": _names(SCOPES, scoped),
            "dropped_fs": _names(FS_RIGHTS, dropped_fs),
            "dropped_net": _names(NET_RIGHTS, dropped_net),
            "dropped_scoped": _names(SCOPES, dropped_scoped),
            "path_rules": path_rules,
            "port_rules": port_rules,
            "skipped_paths": skipped,
        })

    def _prepare_seccomp(self, spec):
        program = spec["program"]
        self._buffer = ctypes.create_string_buffer(program, len(program))
        self._fprog = _SockFprog(len(program) // SOCK_FILTER_SIZE,
                                 ctypes.cast(self._buffer, ctypes.c_void_p))
        self.seccomp_report = {"enforced": False, "denied": spec["denied"],
                               "killed": spec["killed"]}

    # --- in the child -----------------------------------------------------------------

    def enforce(self):
        """Narrows this process (irreversibly) and returns the report; raises
        TighteningError if any part fails."""
        started = time.perf_counter_ns()
        # Landlock and an unprivileged seccomp filter both need no_new_privs
        # (the sandbox set it already; a worker without one gets it now).
        if _libc.prctl(*self._no_new_privs) != 0:
            raise TighteningError(f"prctl(PR_SET_NO_NEW_PRIVS): {_errno_text()}")
        # Landlock first: the filter below may deny the Landlock system calls.
        if self.ruleset >= 0:
            if _libc.syscall(*self._restrict) != 0:
                raise TighteningError(f"Landlock: landlock_restrict_self: {_errno_text()}")
            # Not for the code: a process holding a ruleset can add rules to it.
            self.close()
            self.landlock_report["enforced"] = True
        if self._set_seccomp is not None:
            if _libc.prctl(*self._set_seccomp) != 0:
                raise TighteningError(f"seccomp: prctl(PR_SET_SECCOMP): {_errno_text()}")
            self.seccomp_report["enforced"] = True
        self.report["apply_us"] = (time.perf_counter_ns() - started) // 1000
        return self.report


def prepare(spec):
    """The zygote's half, right before the fork (TighteningError if any part
    of `spec`, from parse(), cannot be built). The caller closes it once it
    has forked."""
    return Prepared(spec)


# --- between the zygote and its child ------------------------------------------------

#: The child's exit status when it did not run the code because the
#: tightening could not be applied.
EXIT_REFUSED = 126


def in_child(prepared, status_fd):
    """The forked child, before the code: enforces `prepared`, writes the
    outcome as JSON on `status_fd` and closes it, so that nothing the code
    does later can write there. Returns only when everything was enforced and
    reported; in every other case (an exception of any kind included) the
    process exits EXIT_REFUSED here, never unwinding into the zygote's code
    it was forked from."""
    try:
        try:
            body = {"applied": prepared.enforce()}
        except TighteningError as e:
            body = {"error": str(e)}
        except BaseException as e:  # noqa: B902 — anything unexpected refuses as well
            body = {"error": f"{type(e).__name__}: {e}"}
        view = memoryview(json.dumps(body).encode("utf-8", "backslashreplace"))
        while view:
            view = view[os.write(status_fd, view):]
        os.close(status_fd)
        if "error" not in body:
            return
    except BaseException:  # noqa: B902
        pass
    os._exit(EXIT_REFUSED)


def outcome(status_fd):
    """The zygote, once the child has exited: what the child applied (a
    dict), or TighteningError with the child's reason. A child that died
    before it reported refused as well: the code may not have run under
    the tightening."""
    # The child wrote everything before it exited; a writer left over cannot
    # exist (the child closed its end before the code ran), but the zygote
    # must never wait on a pipe anyway.
    os.set_blocking(status_fd, False)
    chunks = []
    while True:
        try:
            chunk = os.read(status_fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    try:
        body = json.loads(b"".join(chunks).decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        body = None
    if isinstance(body, dict) and isinstance(body.get("applied"), dict):
        return body["applied"]
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        raise TighteningError(body["error"])
    raise TighteningError("the exec's process ended before it confirmed the tightening")
