"""A session of the castellan daemon: one sandbox kept across execs."""

import urllib.parse
from typing import (TYPE_CHECKING, Any, Dict, Iterator, Mapping, Optional, Sequence, Tuple,
                    Union)

from .errors import CastellanError
from .result import Result

if TYPE_CHECKING:  # pragma: no cover
    from .client import Client, FilesIn

__all__ = ["Session"]


class Session:
    """A session of a daemon (``Client.create_session``, docs/api.md "Sessions").

    What one exec defines (globals, imported modules, the working directory,
    the environment, files in ``/tmp``), the next exec of the same session
    sees. ``exec``, ``run``, ``exec_stream`` and ``run_stream`` take the
    options of the Client's methods of that name but ``pool`` and ``policy``:
    a session runs on the pool, and under the policy, it was made with.

    An exec that kills the session's worker (a timeout, a ``cancel``, a
    stream closed early, oom…) is returned as such and **ends the session**:
    every later call raises CastellanError ``session_ended`` (410). A
    session destroyed, reaped (idle TTL, maximum lifetime) or another
    token's raises ``no_such_session`` (404).

    ``info`` is the session as the daemon described it when it was made
    (``id``, ``owner``, ``pool``, ``workspace``, ``created``, ``idle_ttl_ms``,
    ``max_lifetime_ms``). As a context manager it is destroyed when the
    ``with`` block is left (one already gone is no error then).
    """

    def __init__(self, client: "Client", info: Mapping[str, Any]):
        self._client = client
        self.info: Dict[str, Any] = dict(info)
        self.id: str = str(self.info["id"])
        self._path = "/v1/sessions/" + urllib.parse.quote(self.id, safe="")

    def __repr__(self) -> str:
        return f"Session({self.id!r})"

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.destroy()
        except CastellanError as e:
            if e.code != "no_such_session":
                raise

    def exec(self, code: str, *, stdin: Union[str, bytes, None] = None,
             env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
             timeout_ms: Optional[int] = None, id: Optional[str] = None,
             files_in: Optional["FilesIn"] = None,
             files_out: Optional[Sequence[str]] = None) -> Result:
        """Runs Python ``code`` in the session; its Result (``Client.exec``)."""
        body: Dict[str, Any] = {"code": code}
        body.update(self._client._session_options(stdin, env, cwd, timeout_ms, id, files_in,
                                                  files_out))
        return Result.from_json(self._client._json("POST", self._path + "/exec", body))

    def run(self, argv: Sequence[str], *, stdin: Union[str, bytes, None] = None,
            env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
            timeout_ms: Optional[int] = None, id: Optional[str] = None,
            files_in: Optional["FilesIn"] = None,
            files_out: Optional[Sequence[str]] = None) -> Result:
        """Runs the command ``argv`` (program first) in the session."""
        if isinstance(argv, (str, bytes)):
            raise TypeError("argv is a sequence of strings, the program first")
        body: Dict[str, Any] = {"argv": list(argv)}
        body.update(self._client._session_options(stdin, env, cwd, timeout_ms, id, files_in,
                                                  files_out))
        return Result.from_json(self._client._json("POST", self._path + "/run", body))

    def exec_stream(self, code: str, *, stdin: Union[str, bytes, None] = None,
                    env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
                    timeout_ms: Optional[int] = None, id: Optional[str] = None,
                    files_in: Optional["FilesIn"] = None,
                    files_out: Optional[Sequence[str]] = None) -> Iterator[Tuple[str, Any]]:
        """``exec`` with its output as it is written (``Client.exec_stream``).

        Closing the generator early cancels the exec, which ends the session.
        """
        body: Dict[str, Any] = {"code": code}
        body.update(self._client._session_options(stdin, env, cwd, timeout_ms, id, files_in,
                                                  files_out))
        return self._client._stream(self._path + "/exec", body)

    def run_stream(self, argv: Sequence[str], *, stdin: Union[str, bytes, None] = None,
                   env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
                   timeout_ms: Optional[int] = None, id: Optional[str] = None,
                   files_in: Optional["FilesIn"] = None,
                   files_out: Optional[Sequence[str]] = None) -> Iterator[Tuple[str, Any]]:
        """``run`` with its output as it is written."""
        if isinstance(argv, (str, bytes)):
            raise TypeError("argv is a sequence of strings, the program first")
        body: Dict[str, Any] = {"argv": list(argv)}
        body.update(self._client._session_options(stdin, env, cwd, timeout_ms, id, files_in,
                                                  files_out))
        return self._client._stream(self._path + "/run", body)

    def stats(self) -> Dict[str, Any]:
        """The session now (``GET /v1/sessions/{id}``): ``info``'s keys and
        ``state`` (``starting``, ``ready``, ``running``, ``ended``), ``execs``,
        ``idle_ms``, ``age_ms``, ``end_reason`` and ``worker`` (``cpu_us``,
        ``memory_bytes``, ``memory_peak_bytes``, ``tasks``)."""
        return self._client._json("GET", self._path, None)

    def destroy(self) -> Dict[str, Any]:
        """Destroys the session; its final stats, once its worker is gone."""
        return self._client._json("DELETE", self._path, None)
