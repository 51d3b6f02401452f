"""The errors of the castellan API as Python exceptions."""

import json
from typing import Optional


class CastellanError(Exception):
    """An error answer of the API: its HTTP status, code, message and field.

    Every error the daemon answers has one form (docs/api.md, "Errors"):
    ``{"v": 1, "error": {"code": ..., "message": ..., "field": ...}}``.
    ``code`` is the API's error code (``invalid_field``, ``unknown_pool``,
    ``no_such_exec``, ...), ``field`` the JSON pointer into the request body
    when one field is at fault (``"/pool"``), else None. An answer that is
    not in that form (a proxy's page, say) has ``code`` None and its body,
    shortened, as ``message``.

    Failures to reach the daemon at all are not CastellanErrors: they are
    the OSErrors of the socket (``FileNotFoundError`` for a missing unix
    socket, ``ConnectionRefusedError``, ``TimeoutError``/``socket.timeout``),
    or ``http.client.HTTPException`` for a connection closed mid-answer.
    """

    def __init__(self, status: int, code: Optional[str], message: str,
                 field: Optional[str] = None):
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        where = f" at {field}" if field else ""
        super().__init__(f"{status} {code or 'error'}{where}: {message}")


class BusyError(CastellanError):
    """The daemon refused for load, not for the request: try again later.

    The codes ``busy`` (the pool's queue is full, 503), ``too_many_execs``
    (the token's ``max_concurrent``, 429), ``too_many_sessions`` (the
    daemon's or the owner's limit of sessions, 429) and
    ``too_many_connections`` (503).
    """


#: The error codes that become a BusyError.
BUSY_CODES = frozenset({"busy", "too_many_execs", "too_many_sessions",
                        "too_many_connections"})


def error_from_answer(status: int, body: bytes) -> CastellanError:
    """The exception for an error answer with ``status`` and ``body``."""
    code = None
    field = None
    message = body[:500].decode("utf-8", "replace")
    try:
        doc = json.loads(body)
        err = doc.get("error") if isinstance(doc, dict) else None
        if isinstance(err, dict) and isinstance(err.get("code"), str):
            code = err["code"]
            message = str(err.get("message", ""))
            field = err.get("field")
    except ValueError:
        pass
    cls = BusyError if code in BUSY_CODES else CastellanError
    return cls(status, code, message, field)
