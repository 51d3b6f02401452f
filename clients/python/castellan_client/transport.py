"""HTTP connections to the daemon: a unix socket, plain TCP, or TLS."""

import http.client
import socket
import ssl
import urllib.parse
from dataclasses import dataclass
from typing import Callable, Optional

#: Where ``castellan serve`` listens by default when it runs as root.
DEFAULT_ADDRESS = "unix:/run/castellan/castellan.sock"


class UnixHTTPConnection(http.client.HTTPConnection):
    """An HTTPConnection whose socket is a unix stream socket at ``path``.

    The request's Host header is ``localhost``; the daemon does not check
    it on a unix socket.
    """

    def __init__(self, path: str, timeout: Optional[float] = None):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self._path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


@dataclass(frozen=True)
class Endpoint:
    """A parsed address: how to open a connection to the daemon."""

    scheme: str  # "unix", "http" or "https"
    host: str  # the socket path for "unix"
    port: Optional[int]

    def describe(self) -> str:
        if self.scheme == "unix":
            return "unix:" + self.host
        return f"{self.scheme}://{self.host}:{self.port}"


def parse_address(address: str) -> Endpoint:
    """The Endpoint of ``address``.

    ``unix:PATH`` (an absolute path), ``http://HOST:PORT``,
    ``https://HOST:PORT``, or the daemon's ``--listen`` forms ``tcp:HOST:PORT``
    (the same as ``http://``) and ``tls:HOST:PORT`` (the same as
    ``https://``). A URL may not carry a path, query or credentials: the
    API's routes are fixed.
    """
    if address.startswith("unix:"):
        path = address[len("unix:"):]
        if not path.startswith("/"):
            raise ValueError(f"{address!r}: a unix socket address needs an absolute path")
        return Endpoint("unix", path, None)
    if address.startswith("tcp:"):
        address = "http://" + address[len("tcp:"):]
    elif address.startswith("tls:"):
        address = "https://" + address[len("tls:"):]
    url = urllib.parse.urlsplit(address)
    if url.scheme not in ("http", "https"):
        raise ValueError(
            f"{address!r}: expected unix:PATH, http://HOST:PORT, https://HOST:PORT, "
            "tcp:HOST:PORT or tls:HOST:PORT")
    if url.path not in ("", "/") or url.query or url.fragment or url.username or url.password:
        raise ValueError(f"{address!r}: give the host and port only")
    if not url.hostname:
        raise ValueError(f"{address!r}: no host")
    port = url.port or (443 if url.scheme == "https" else 80)
    return Endpoint(url.scheme, url.hostname, port)


def connection_factory(endpoint: Endpoint, timeout: Optional[float],
                       ca_file: Optional[str]) -> Callable[[], http.client.HTTPConnection]:
    """A function that makes a new, unconnected HTTPConnection to ``endpoint``.

    For https the server's certificate is checked against ``ca_file`` when
    given, else against the system's trusted CAs (``ssl.create_default_context``),
    and must name the host of the address.
    """
    if endpoint.scheme == "unix":
        return lambda: UnixHTTPConnection(endpoint.host, timeout=timeout)
    if endpoint.scheme == "http":
        return lambda: http.client.HTTPConnection(endpoint.host, endpoint.port, timeout=timeout)
    context = ssl.create_default_context(cafile=ca_file)
    return lambda: http.client.HTTPSConnection(endpoint.host, endpoint.port, timeout=timeout,
                                               context=context)
