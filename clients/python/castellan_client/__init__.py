"""castellan_client: the Python client of castellan's HTTP/JSON API.

Standard library only. ``Client`` talks to a daemon (``castellan serve``)
on its unix socket, or on TCP or TLS with a bearer token::

    from castellan_client import Client

    with Client("unix:/run/castellan/castellan.sock") as c:
        r = c.exec("print(6*7)")
        print(r.error_class, r.stdout_text)

See the README beside this package and docs/api.md of castellan.
"""

from .client import Client
from .errors import BusyError, CastellanError
from .result import FileOut, Result
from .session import Session
from .transport import DEFAULT_ADDRESS

__all__ = ["Client", "Session", "Result", "FileOut", "CastellanError", "BusyError", "DEFAULT_ADDRESS"]
__version__ = "0.1.0"
