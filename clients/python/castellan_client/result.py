"""The result of an exec, as the API answers it."""

import base64
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional


def _output(doc: Dict[str, Any], name: str) -> bytes:
    """stdout or stderr as bytes: base64-decoded where the answer flags it."""
    value = doc.get(name) or ""
    if doc.get(name + "_base64"):
        return base64.b64decode(value, validate=True)
    return value.encode("utf-8")


@dataclass
class FileOut:
    """One of an exec's ``files_out``, read back once the exec ended.

    ``path`` is as the request named it, ``size`` the file's size in bytes
    (also when it was too large to bring back). ``content`` is its bytes
    (decoded from base64 when the answer sent them so), or None when the
    file did not come back: then ``error`` says why (``missing``,
    ``not_regular``, ``too_large``, ``unreadable``, ``not_collected``) and
    ``message`` explains it.
    """

    path: str
    size: int = 0
    content: Optional[bytes] = None
    error: Optional[str] = None
    message: Optional[str] = None

    @classmethod
    def from_json(cls, doc: Dict[str, Any]) -> "FileOut":
        """The FileOut of one entry of an answer's ``files``."""
        content = None
        if "content_base64" in doc:
            content = base64.b64decode(doc["content_base64"], validate=True)
        elif "content" in doc:
            content = str(doc["content"]).encode("utf-8")
        return cls(path=doc.get("path", ""), size=int(doc.get("size", 0)), content=content,
                   error=doc.get("error"), message=doc.get("message"))


@dataclass
class Result:
    """How one exec (or run) ended: the 200 answer of ``POST /v1/exec``.

    An exec that ran is a Result whatever it did; ``error_class`` and
    ``exit_code`` say how it ended: ``ok`` (0), ``exception`` (1),
    ``timeout`` (124), ``cancelled`` (125), ``limit_exceeded``,
    ``policy_kill``, ``oom``, ``worker_lost``, ``busy``.

    ``stdout`` and ``stderr`` are bytes: the daemon sends output that is
    valid UTF-8 as text and other output as base64 (with
    ``stdout_base64``/``stderr_base64`` true); either way they are the bytes
    the code wrote, up to the pool's output limit (``stdout_truncated``).
    ``stdout_text`` and ``stderr_text`` decode them as UTF-8, with U+FFFD
    for what is not.

    ``exception`` is None or a dict with ``type``, ``message`` and
    ``traceback``; ``events`` the policy events of the exec (dicts with
    ``kind``, ``syscall``, ``target``, ``decision``, ``rule``, ``pid``,
    ``timestamp_ns``); ``timing`` has ``queue_us`` and ``run_us``; ``usage``
    has ``cpu_us`` and ``peak_memory_bytes``; ``detail`` is the daemon's
    explanation of a non-ok end (``"deadline of 300 ms reached"``).
    ``exec_id`` is the daemon's number for the exec, ``id`` the request's
    own id when it gave one. ``files`` has a FileOut for each of the
    request's ``files_out``, in its order (empty without them). ``raw`` is
    the whole answer as parsed JSON.
    """

    exec_id: int
    exit_code: int
    error_class: str
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    exception: Optional[Dict[str, Any]] = None
    events: List[Dict[str, Any]] = field(default_factory=list)
    timing: Dict[str, int] = field(default_factory=dict)
    usage: Dict[str, int] = field(default_factory=dict)
    detail: str = ""
    worker_id: Optional[int] = None
    id: Optional[str] = None
    files: List[FileOut] = field(default_factory=list)
    enforcement: Any = field(default=None, repr=False)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        """True when the exec ended with error_class ``ok``."""
        return self.error_class == "ok"

    @property
    def stdout_text(self) -> str:
        """stdout decoded as UTF-8 (U+FFFD for invalid bytes)."""
        return self.stdout.decode("utf-8", "replace")

    @property
    def stderr_text(self) -> str:
        """stderr decoded as UTF-8 (U+FFFD for invalid bytes)."""
        return self.stderr.decode("utf-8", "replace")

    @classmethod
    def from_json(cls, doc: Dict[str, Any]) -> "Result":
        """The Result of a parsed 200 answer of /v1/exec or /v1/run."""
        return cls(
            exec_id=doc.get("exec_id", 0),
            exit_code=doc.get("exit_code", -1),
            error_class=doc.get("error_class", ""),
            stdout=_output(doc, "stdout"),
            stderr=_output(doc, "stderr"),
            stdout_truncated=bool(doc.get("stdout_truncated", False)),
            stderr_truncated=bool(doc.get("stderr_truncated", False)),
            exception=doc.get("exception"),
            events=list(doc.get("events") or []),
            timing=dict(doc.get("timing") or {}),
            usage=dict(doc.get("usage") or {}),
            detail=doc.get("detail", ""),
            worker_id=doc.get("worker_id"),
            id=doc.get("id"),
            files=[FileOut.from_json(f) for f in doc.get("files") or []],
            enforcement=doc.get("enforcement"),
            raw=doc,
        )
