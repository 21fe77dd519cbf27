"""What of the gateway's environment a stdio upstream gets: a fixed list of names that carry no secret.

A server started by ``npx`` or ``uvx`` on a corporate network needs the user's proxy, CA certificates, locale and
folders, as it gets them when a desktop client starts it. Nothing else passes: a token in the gateway's
environment reaches a server only when its entry names it (``env: {GITHUB_TOKEN: "${GITHUB_TOKEN}"}``), which
wins over these.

A proxy URL may carry credentials (``http://user:pass@proxy:3128``). It passes as it is: it is the user's own
environment given to the user's own server, as every MCP client does, and the server cannot reach that proxy
without them. Only the names passed are ever logged, never a value, and nothing of the environment reaches a
snippet or a model.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

__all__ = ["PASSED_NAMES", "PASSED_PREFIXES", "passed_environment"]

PASSED_NAMES: Final = (
    # who and where: what the MCP SDK's stdio client passes by default
    "HOME",
    "LOGNAME",
    "USER",
    "PATH",
    "SHELL",
    "TERM",
    "TMPDIR",
    # the network: proxies (curl's lower case and the upper case), and the CA certificates of Python, Node, curl
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    # language and time
    "LANG",
    "LANGUAGE",
    "TZ",
    # the desktop, for a server that opens a browser window (an OAuth login)
    "DISPLAY",
    "WAYLAND_DISPLAY",
)
PASSED_PREFIXES: Final = ("LC_", "XDG_")
"""The locale's categories (LC_ALL, LC_CTYPE, ...) and the user's folders (XDG_CONFIG_HOME, XDG_CACHE_HOME, ...)."""
_SECRET_WORDS: Final = re.compile(r"TOKEN|SECRET|PASS|KEY|COOKIE|CREDENTIAL|AUTH", re.IGNORECASE)
"""A name under a prefix that reads like a secret's does not pass (a session cookie some desktops set)."""


def passed_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of ``environ`` a stdio upstream gets. A value that is a shell function (``() { ...``) never
    passes: bash would define it in any shell the server starts."""
    return {
        name: value
        for name, value in environ.items()
        if (name in PASSED_NAMES or (name.startswith(PASSED_PREFIXES) and not _SECRET_WORDS.search(name)))
        and not value.startswith("()")
    }
