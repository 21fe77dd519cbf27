"""The gateway's own HTTP server: uvicorn with deadlines for slow requests and a cap on connections, over TLS
when given a certificate.

Below ``serve`` and ``auth``, which both run it: the HTTP front, and the loopback listener of ``onetool auth``.
"""

from onetool.httpd._limits import DEFAULT_LIMITS, HttpLimits
from onetool.httpd._server import LISTEN_QUEUE, UvicornServer
from onetool.httpd._tls import server_tls

__all__ = ["DEFAULT_LIMITS", "LISTEN_QUEUE", "HttpLimits", "UvicornServer", "server_tls"]
