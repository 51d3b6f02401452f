"""The client of the castellan daemon's HTTP/JSON API (docs/api.md)."""

import base64
import http.client
import json
import socket
import threading
import urllib.parse
from typing import (Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple,
                    Union)

from .errors import CastellanError, error_from_answer
from .result import Result
from .session import Session
from .transport import DEFAULT_ADDRESS, connection_factory, parse_address

__all__ = ["Client"]

#: ``files_in``: a mapping of path to content, or a sequence of dicts
#: ``{"path", "content", "mode"}``; content is str (text) or bytes.
FilesIn = Union[Mapping[str, Union[str, bytes]], Sequence[Mapping[str, Any]]]

_USER_AGENT = "castellan-python/0.1"


class Client:
    """A client of one castellan daemon.

    ``address`` is ``unix:PATH`` (the default,
    ``unix:/run/castellan/castellan.sock``), ``http://HOST:PORT`` or
    ``https://HOST:PORT`` (or the daemon's listener forms ``tcp:HOST:PORT``
    and ``tls:HOST:PORT``). ``token`` is a bearer token (``castellan token
    new``) sent as ``Authorization: Bearer``; TCP listeners of a daemon with
    a tokens file need one, a unix socket does not. ``ca_file`` is the PEM
    file of the CA that signs an https daemon's certificate (default: the
    system's trusted CAs); the certificate must name the address's host.
    ``timeout`` is the socket timeout in seconds for
    the connect and for each read; None waits as long as the daemon takes
    (an exec's answer comes when the exec ends, so a timeout shorter than
    an exec's deadline abandons it, and the daemon cancels an exec whose
    connection closes).

    Threads: a Client may be shared by any number of threads. Each call
    opens its own connection and closes it when the answer is read, so
    calls never wait for one another; ``cancel`` from one thread ends an
    ``exec`` that another thread waits for. ``close()`` (or leaving a
    ``with`` block) shuts down the connections of calls still in flight,
    whose execs the daemon then cancels, and makes later calls fail.

    Every method raises CastellanError (BusyError for load refusals) for
    an error answer of the API, and OSError when the daemon cannot be
    reached.
    """

    def __init__(self, address: str = DEFAULT_ADDRESS, token: Optional[str] = None,
                 ca_file: Optional[str] = None, timeout: Optional[float] = None):
        self.address = address
        self._endpoint = parse_address(address)
        if ca_file is not None and self._endpoint.scheme != "https":
            raise ValueError("ca_file is for https:// addresses")
        self._token = token
        self._new_connection = connection_factory(self._endpoint, timeout, ca_file)
        self._lock = threading.Lock()
        self._in_flight: set = set()
        self._closed = False

    def __repr__(self) -> str:
        return f"Client({self._endpoint.describe()!r})"

    # --- context manager -------------------------------------------------

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Shuts down the connections of calls in flight; later calls raise.

        A call whose connection is shut down raises (an OSError or
        ``http.client.RemoteDisconnected``), and the daemon cancels its
        exec. Idempotent.
        """
        with self._lock:
            self._closed = True
            conns = list(self._in_flight)
        for conn in conns:
            sock = conn.sock
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    # --- execs -----------------------------------------------------------

    def exec(self, code: str, *, stdin: Union[str, bytes, None] = None,
             env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
             timeout_ms: Optional[int] = None, pool: Optional[str] = None,
             policy: Optional[Mapping[str, Any]] = None, id: Optional[str] = None,
             files_in: Optional[FilesIn] = None,
             files_out: Optional[Sequence[str]] = None) -> Result:
        """Runs Python ``code`` and returns its Result once it ended.

        ``stdin`` is what the code reads on fd 0: a str is sent as UTF-8
        text (``stdin``), bytes as base64 (``stdin_base64``) so that any
        bytes arrive as they are. ``env`` sets environment variables over
        the worker's; ``cwd`` is the absolute path inside the sandbox the
        code starts in. ``timeout_ms`` is the exec's deadline (1..86400000,
        default the pool's); ``pool`` the pool's name (default the
        daemon's first); ``policy`` a request policy document (a dict).
        ``id`` is the caller's name for the exec (1 to 64 of ``A-Za-z0-9._-``,
        not digits only), unique among the execs in flight, by which
        ``cancel`` finds it.

        ``files_in`` are files written before the code runs: a mapping of
        path to content, or a sequence of dicts ``{"path", "content",
        "mode"}`` (``mode``, the permission bits, is optional: 0o644); a
        content that is str is sent as UTF-8 text, bytes as base64.
        ``files_out`` are the paths of files read back once the exec ended,
        into the Result's ``files``. A path is relative to ``cwd`` (``/tmp``
        when not given) or absolute, below ``/tmp`` or ``cwd``; another is
        refused (CastellanError ``invalid_field``, its ``field`` the
        path's, ``/files_in/0/path``). Arguments left None are not sent.
        """
        body: Dict[str, Any] = {"code": code}
        body.update(_options(stdin, env, cwd, timeout_ms, pool, policy, id, files_in, files_out))
        return Result.from_json(self._json("POST", "/v1/exec", body))

    def run(self, argv: Sequence[str], *, stdin: Union[str, bytes, None] = None,
            env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
            timeout_ms: Optional[int] = None, pool: Optional[str] = None,
            policy: Optional[Mapping[str, Any]] = None, id: Optional[str] = None,
            files_in: Optional[FilesIn] = None,
            files_out: Optional[Sequence[str]] = None) -> Result:
        """Runs the command ``argv`` (program first) and returns its Result.

        The pool's policy decides which programs may run; the options are
        those of ``exec``.
        """
        if isinstance(argv, (str, bytes)):
            raise TypeError("argv is a sequence of strings, the program first")
        body: Dict[str, Any] = {"argv": list(argv)}
        body.update(_options(stdin, env, cwd, timeout_ms, pool, policy, id, files_in, files_out))
        return Result.from_json(self._json("POST", "/v1/run", body))

    def exec_stream(self, code: str, *, stdin: Union[str, bytes, None] = None,
                    env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
                    timeout_ms: Optional[int] = None, pool: Optional[str] = None,
                    policy: Optional[Mapping[str, Any]] = None, id: Optional[str] = None,
                    files_in: Optional[FilesIn] = None,
                    files_out: Optional[Sequence[str]] = None) -> Iterator[Tuple[str, Any]]:
        """Runs Python ``code`` and yields its output as the code writes it.

        Yields ``("stdout", bytes)`` and ``("stderr", bytes)`` pieces in the
        order the daemon sends them, then ``("result", Result)`` (the same
        Result ``exec`` returns, all the output included), and stops. The
        daemon answers with server-sent events (``Accept:
        text/event-stream``, docs/api.md); the code's stdout and stderr are
        line-buffered. The request is sent at the first ``next()``: a
        request refused before it runs raises CastellanError there; an
        error after output began raises it where it comes. Closing the
        generator early (or ``close()`` on the client) closes the
        connection, and the daemon cancels the exec.
        The options are those of ``exec``.
        """
        body: Dict[str, Any] = {"code": code}
        body.update(_options(stdin, env, cwd, timeout_ms, pool, policy, id, files_in, files_out))
        return self._stream("/v1/exec", body)

    def run_stream(self, argv: Sequence[str], *, stdin: Union[str, bytes, None] = None,
                   env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
                   timeout_ms: Optional[int] = None, pool: Optional[str] = None,
                   policy: Optional[Mapping[str, Any]] = None, id: Optional[str] = None,
                   files_in: Optional[FilesIn] = None,
                   files_out: Optional[Sequence[str]] = None) -> Iterator[Tuple[str, Any]]:
        """``exec_stream`` for the command ``argv`` (program first)."""
        if isinstance(argv, (str, bytes)):
            raise TypeError("argv is a sequence of strings, the program first")
        body: Dict[str, Any] = {"argv": list(argv)}
        body.update(_options(stdin, env, cwd, timeout_ms, pool, policy, id, files_in, files_out))
        return self._stream("/v1/run", body)

    def _stream(self, target: str, body: Dict[str, Any]) -> Iterator[Tuple[str, Any]]:
        conn, response = self._open("POST", target, body, accept="text/event-stream")
        try:
            content_type = response.getheader("Content-Type", "")
            if response.status != 200 or not content_type.startswith("text/event-stream"):
                data = response.read()
                if not 200 <= response.status < 300:
                    raise error_from_answer(response.status, data)
                raise CastellanError(response.status, None,
                                     f"the answer is not an event stream ({content_type})")
            for name, data in _events(response):
                if name in ("stdout", "stderr"):
                    piece = json.loads(data)
                    text = piece.get("data", "")
                    yield name, (base64.b64decode(text, validate=True) if piece.get("base64")
                                 else text.encode("utf-8"))
                elif name == "result":
                    yield "result", Result.from_json(json.loads(data))
                    return
                elif name == "error":
                    raise error_from_answer(500, data.encode("utf-8"))
            raise CastellanError(response.status, None,
                                 "the event stream ended without a result")
        finally:
            self._release(conn)

    def cancel(self, id: Union[str, int]) -> Dict[str, Any]:
        """Cancels the exec in flight with this ``id`` (or ``exec_id``).

        Returns the daemon's answer: ``exec_id``, ``id`` (when the exec has
        one), ``cancelled`` (False when the exec had ended first) and
        ``outcome`` (``cancelled_running``, ``cancelled_queued``,
        ``already_finished``, ``unknown``). The cancelled exec's own call
        returns its Result with error_class ``cancelled``. Nothing in flight
        with that id: CastellanError ``no_such_exec`` (404).
        """
        target = "/v1/execs/" + urllib.parse.quote(str(id), safe="")
        return self._json("DELETE", target, None)

    # --- sessions --------------------------------------------------------

    def create_session(self, *, pool: Optional[str] = None,
                       idle_ttl_ms: Optional[int] = None,
                       max_lifetime_ms: Optional[int] = None,
                       workspace: Optional[str] = None) -> Session:
        """Creates a session (``POST /v1/sessions``) and returns it once its
        worker is ready.

        ``pool`` is the pool whose policy, limits and interpreter its worker
        gets (default: the daemon's first); ``idle_ttl_ms`` and
        ``max_lifetime_ms`` end it after that long without an exec, or that
        long after it started (default 10 min and 1 h; above the daemon's
        maximum: CastellanError ``invalid_field``). ``workspace`` names one
        of the caller's workspaces (``create_workspace``), bound read-write
        at ``/workspace``. The daemon's or the
        token's limit of sessions raises BusyError ``too_many_sessions``.
        Arguments left None are not sent.
        """
        body: Dict[str, Any] = {}
        if pool is not None:
            body["pool"] = pool
        if idle_ttl_ms is not None:
            body["idle_ttl_ms"] = idle_ttl_ms
        if max_lifetime_ms is not None:
            body["max_lifetime_ms"] = max_lifetime_ms
        if workspace is not None:
            body["workspace"] = workspace
        return Session(self, self._json("POST", "/v1/sessions", body))

    def session(self, id: str) -> Session:
        """The session ``id`` (one made earlier, by this token), without a
        request: its calls say whether it still exists."""
        return Session(self, {"id": id})

    def sessions(self) -> List[Dict[str, Any]]:
        """The sessions (``GET /v1/sessions``): a token limited to some pools
        sees its own, any other caller every one. Dicts as ``Session.info``."""
        return list(self._json("GET", "/v1/sessions", None).get("sessions", []))

    def _session_options(self, stdin: Union[str, bytes, None],
                         env: Optional[Mapping[str, str]], cwd: Optional[str],
                         timeout_ms: Optional[int], id: Optional[str],
                         files_in: Optional[FilesIn],
                         files_out: Optional[Sequence[str]]) -> Dict[str, Any]:
        return _options(stdin, env, cwd, timeout_ms, None, None, id, files_in, files_out)

    # --- workspaces ------------------------------------------------------

    def workspaces(self) -> List[Dict[str, Any]]:
        """The caller's workspaces (``GET /v1/workspaces``): dicts with
        ``name``, ``quota_bytes``, ``mounted``, ``used_bytes``, ``free_bytes``
        and ``users`` (the sessions holding it)."""
        return list(self._json("GET", "/v1/workspaces", None).get("workspaces", []))

    def create_workspace(self, name: str, quota_bytes: Optional[int] = None) -> Dict[str, Any]:
        """Creates the workspace ``name`` (``POST /v1/workspaces``) with
        ``quota_bytes`` of space (default: the daemon's default quota); a
        session made with ``workspace=name`` binds it at ``/workspace``. A
        name taken raises CastellanError ``workspace_exists``."""
        body: Dict[str, Any] = {"name": name}
        if quota_bytes is not None:
            body["quota_bytes"] = quota_bytes
        return self._json("POST", "/v1/workspaces", body)

    def remove_workspace(self, name: str) -> Dict[str, Any]:
        """Removes the workspace ``name`` and its files; the workspace as it
        was last. One a session holds raises ``workspace_in_use``."""
        return self._json("DELETE", "/v1/workspaces/" + urllib.parse.quote(name, safe=""), None)

    # --- the daemon ------------------------------------------------------

    def pools(self) -> List[Dict[str, Any]]:
        """The status of every pool (``GET /v1/pools``): a list of dicts with
        ``name``, ``policy``, ``policy_revision``, ``size``, ``idle``,
        ``busy``, ``starting``, ``queued``, ``queue_limit``, ``spawned``,
        ``completed``, ``lost``."""
        return list(self._json("GET", "/v1/pools", None).get("pools", []))

    def status(self) -> Dict[str, Any]:
        """The daemon at a glance (``GET /v1/status``): ``version``,
        ``draining``, ``uptime_ms``, ``in_flight``, ``connections``,
        ``pools`` (as ``pools()``) and ``summary``, the telemetry summary's
        figures."""
        return self._json("GET", "/v1/status", None)

    def check_policy(self, policy: Mapping[str, Any]) -> Dict[str, Any]:
        """Validates a policy document as ``castellan policy check`` does
        (``POST /v1/policies/check``).

        Returns ``{"valid": True}`` (with ``warnings``, a list of strings,
        when there are some) or ``{"valid": False, "errors": [...]}``, each
        error with the JSON ``pointer`` into the policy, the ``message``,
        and the ``value`` and ``file`` when known. An ``extends`` entry that
        is a path raises CastellanError ``invalid_field``.
        """
        return self._json("POST", "/v1/policies/check", {"policy": dict(policy)})

    def explain_policy(self, policy: Optional[Mapping[str, Any]] = None, *,
                       name: Optional[str] = None,
                       fs: Union[str, Sequence[str], None] = None,
                       net: Union[str, Sequence[str], None] = None,
                       exec: Union[str, Sequence[str], None] = None) -> Dict[str, Any]:
        """Decides queries against a policy as ``castellan policy explain``
        does (``POST /v1/policies/explain``).

        Give the policy as a document (``policy``) or by the ``name`` of a
        policy of the daemon's policy directory, and at least one query:
        ``fs`` (``"read_file:/etc/passwd"``), ``net``
        (``"connect:tcp:1.2.3.4:443"``) or ``exec`` (``"/usr/bin/id"``), each
        a string or a list of strings. Returns the answer: ``policy`` and
        ``decisions``, one per query (fs, then net, then exec), each with
        ``kind``, ``query``, ``decision``, ``by``, ``why`` and, when known,
        ``rule`` and ``origin``.
        """
        if (policy is None) == (name is None):
            raise ValueError("give either policy or name")
        body: Dict[str, Any] = {"policy": dict(policy)} if policy is not None else {"name": name}
        for key, value in (("fs", fs), ("net", net), ("exec", exec)):
            if value is not None:
                body[key] = value if isinstance(value, str) else list(value)
        return self._json("POST", "/v1/policies/explain", body)

    def audit(self, kinds: Optional[Sequence[str]] = None, *, exec_id: Optional[int] = None,
              since: Optional[str] = None, follow: bool = True,
              on_dropped: Optional[Callable[[int], None]] = None) -> Iterator[Dict[str, Any]]:
        """The daemon's audit records as they are recorded (``GET /v1/audit``):
        an iterator of dicts, one per record (docs/audit.md).

        ``kinds`` keeps those kinds (``"exec_end"``, ``"syscall_denied"``…),
        ``exec_id`` one exec's records; ``since`` (an RFC 3339 time, or a
        duration ago such as ``"15m"``) first yields what the daemon's audit
        file holds from then on. With ``follow=False`` the iterator ends after
        that history; otherwise it goes on until the daemon stops or the
        iterator is closed (``close()``, or leaving a ``for`` loop with
        ``break`` and dropping it), which ends the subscription. Records
        dropped because this client read too slowly are reported to
        ``on_dropped(count)`` (default: ignored) before the next record. A
        bad filter raises CastellanError (400, ``field`` names it) at the
        first ``next()``.
        """
        query: List[Tuple[str, str]] = []
        if kinds:
            query.append(("kind", ",".join(kinds)))
        if exec_id is not None:
            query.append(("exec", str(exec_id)))
        if since is not None:
            query.append(("since", since))
        target = "/v1/audit"
        if query:
            target += "?" + urllib.parse.urlencode(query, quote_via=urllib.parse.quote)
        return self._audit_events(target, follow, on_dropped)

    def _audit_events(self, target: str, follow: bool,
                      on_dropped: Optional[Callable[[int], None]]) -> Iterator[Dict[str, Any]]:
        conn, response = self._open("GET", target, None, accept="text/event-stream")
        try:
            if response.status != 200:
                raise error_from_answer(response.status, response.read())
            name, data = "", ""
            while True:
                line = response.readline()
                if not line:
                    return  # the daemon closed the stream
                text = line.decode("utf-8").rstrip("\n")
                if text:
                    if text.startswith("event: "):
                        name = text[7:]
                    elif text.startswith("data: "):
                        data = text[6:]
                    continue
                # A blank line ends an event.
                if name == "audit":
                    yield json.loads(data)
                elif name == "dropped" and on_dropped is not None:
                    on_dropped(int(json.loads(data).get("dropped", 0)))
                elif name == "live" and not follow:
                    return
                elif name == "end":
                    return
                name, data = "", ""
        finally:
            self._release(conn)

    def health(self) -> str:
        """``"ok"``, or ``"draining"`` once the daemon is shutting down."""
        return self._json("GET", "/v1/health", None)["status"]

    def metrics(self) -> str:
        """The Prometheus text exposition of ``GET /metrics``."""
        status, _, body = self._exchange("GET", "/metrics", None)
        if status != 200:
            raise error_from_answer(status, body)
        return body.decode("utf-8")

    # --- HTTP ------------------------------------------------------------

    def _json(self, method: str, target: str, body: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        """One request whose 2xx answer is a JSON object: that object."""
        status, content_type, data = self._exchange(method, target, body)
        if not 200 <= status < 300:
            raise error_from_answer(status, data)
        try:
            doc = json.loads(data)
        except ValueError as e:
            raise CastellanError(status, None, f"the answer is not JSON ({content_type}): {e}")
        if not isinstance(doc, dict):
            raise CastellanError(status, None, "the answer is not a JSON object")
        return doc

    def _exchange(self, method: str, target: str,
                  body: Optional[Dict[str, Any]]) -> Tuple[int, str, bytes]:
        """One request on a connection of its own: status, type and body."""
        conn, response = self._open(method, target, body)
        try:
            data = response.read()
            return response.status, response.getheader("Content-Type", ""), data
        finally:
            self._release(conn)

    def _open(self, method: str, target: str, body: Optional[Dict[str, Any]],
              accept: str = "application/json"
              ) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Sends a request on a new connection; the connection and the
        response, its headers read and its body not. The caller reads the
        body and then calls ``_release(conn)``."""
        headers = {"User-Agent": _USER_AGENT, "Accept": accept}
        if self._token is not None:
            headers["Authorization"] = "Bearer " + self._token
        payload = None
        if body is not None:
            payload = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        conn = self._new_connection()
        with self._lock:
            if self._closed:
                raise ValueError("the client is closed")
            self._in_flight.add(conn)
        try:
            conn.connect()
            # A close() that ran before the socket existed could not shut it down.
            with self._lock:
                if self._closed:
                    raise ValueError("the client is closed")
            conn.request(method, target, body=payload, headers=headers)
            return conn, conn.getresponse()
        except BaseException:
            self._release(conn)
            raise

    def _release(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            self._in_flight.discard(conn)
        conn.close()


def _events(response: http.client.HTTPResponse) -> Iterator[Tuple[str, str]]:
    """The (event name, data) of a server-sent event stream, as they come."""
    name, data = "message", []
    while True:
        line = response.readline()
        if not line:
            return
        text = line.decode("utf-8").rstrip("\r\n")
        if not text:
            if data:
                yield name, "\n".join(data)
            name, data = "message", []
        elif text.startswith(":"):
            continue
        else:
            field, _, value = text.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)


def _options(stdin: Union[str, bytes, None], env: Optional[Mapping[str, str]],
             cwd: Optional[str], timeout_ms: Optional[int], pool: Optional[str],
             policy: Optional[Mapping[str, Any]], id: Optional[str],
             files_in: Optional[FilesIn], files_out: Optional[Sequence[str]]) -> Dict[str, Any]:
    """The request fields shared by exec and run; None is left out."""
    out: Dict[str, Any] = {}
    if files_in is not None:
        out["files_in"] = _files_in(files_in)
    if files_out is not None:
        if isinstance(files_out, (str, bytes)):
            raise TypeError("files_out is a sequence of paths")
        out["files_out"] = [str(p) for p in files_out]
    if isinstance(stdin, (bytes, bytearray, memoryview)):
        out["stdin_base64"] = base64.b64encode(bytes(stdin)).decode("ascii")
    elif stdin is not None:
        out["stdin"] = stdin
    if env is not None:
        out["env"] = dict(env)
    if cwd is not None:
        out["cwd"] = cwd
    if timeout_ms is not None:
        out["timeout_ms"] = timeout_ms
    if pool is not None:
        out["pool"] = pool
    if policy is not None:
        out["policy"] = dict(policy)
    if id is not None:
        out["id"] = id
    return out


def _files_in(files: FilesIn) -> List[Dict[str, Any]]:
    """The API's ``files_in`` for a mapping of path to content or a sequence
    of ``{"path", "content", "mode"}``: str content as text, bytes as base64."""
    if isinstance(files, Mapping):
        entries: List[Mapping[str, Any]] = [{"path": p, "content": c} for p, c in files.items()]
    elif isinstance(files, (str, bytes)):
        raise TypeError("files_in is a mapping of path to content, or a sequence of dicts")
    else:
        entries = list(files)
    out = []
    for n, f in enumerate(entries):
        if not isinstance(f, Mapping) or "path" not in f or "content" not in f:
            raise TypeError(f"files_in[{n}]: a dict with path and content (and mode)")
        unknown = set(f) - {"path", "content", "mode"}
        if unknown:
            raise TypeError(f"files_in[{n}]: unknown keys {sorted(unknown)}")
        entry: Dict[str, Any] = {"path": f["path"]}
        content = f["content"]
        if isinstance(content, (bytes, bytearray, memoryview)):
            entry["content_base64"] = base64.b64encode(bytes(content)).decode("ascii")
        elif isinstance(content, str):
            entry["content"] = content
        else:
            raise TypeError(f"files_in[{n}]: content is str or bytes")
        if f.get("mode") is not None:
            entry["mode"] = f["mode"]
        out.append(entry)
    return out
