"""The gateway's client of ``onetool bridge`` (or any service with the same /convert API).

    bridge = BridgeClient.from_config(config.bridge)      # None when no bridge is configured
    url = await bridge.convert("everything", config.servers["everything"])   # 201, or 409: already running
    await bridge.revert("everything")                     # True: stopped; False: it was not running (404)

What the gateway's admin actions need from a failure is :class:`BridgeError.status`: 400 (the spec was
refused: ``field`` says which part), 429 (the bridge is full), or 503 :class:`BridgeUnavailable` (the bridge
is unreachable, refused the token or its certificate, could not start the process, or serves it over plain
http without ``bridge.allow_http``: the message says which). In every failure case nothing changed on the bridge,
so the gateway changes nothing either. Env values and the token never appear in a message or a log record.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

import httpx2

from onetool.config import BridgeConfig, ServerConfig
from onetool.errors import BridgeError, BridgeUnavailable
from onetool.hosts import plain_http_host
from onetool.logs import LogSpan
from onetool.text import public_url
from onetool.upstream.transports import TRUST_FIX, untrusted_certificate

__all__ = ["BridgeClient", "Conversion"]

# Starting a server waits for it to connect (its connect_timeout, 20 s by default).
DEFAULT_TIMEOUT: Final = 60.0


@dataclass(frozen=True)
class Conversion:
    """One server as the bridge serves it."""

    server_name: str
    url: str
    port: int
    status: str
    """running, starting, restarting (its process died; it is being restarted), idle (stopped until called)."""


class BridgeClient:
    def __init__(
        self, url: str, token: str | None = None, *, allow_http: bool = False, timeout: float = DEFAULT_TIMEOUT
    ) -> None:
        self.url = url.rstrip("/")
        self.token = token
        """Also the token of every URL the bridge serves."""
        self.allow_http = allow_http
        """``bridge.allow_http``: the URLs it serves may be plain http to a host that is not loopback."""
        self._timeout = timeout

    @classmethod
    def from_config(cls, config: BridgeConfig, environ: Mapping[str, str] | None = None) -> BridgeClient | None:
        """The configured bridge (``$ONETOOL_BRIDGE_URL`` / ``$ONETOOL_BRIDGE_TOKEN`` win), or None without a URL."""
        resolved = config.resolved(environ)
        return cls(resolved.url, resolved.token, allow_http=resolved.allow_http) if resolved.url else None

    def served(self, name: str, url: str) -> str:
        """``url``, where the bridge serves ``name``, if the gateway may connect there: plain http to another host
        only with ``bridge.allow_http`` (a bridge reached over https may still answer http URLs, e.g. behind a TLS
        proxy, and the token would then travel in clear)."""
        host = plain_http_host(url)
        if host is None or self.allow_http:
            return url
        raise BridgeUnavailable(
            f"the bridge at {public_url(self.url)} serves '{name}' over plain http at {host}: start it with "
            "--tls-cert/--tls-key, or set bridge.allow_http: true if the network to it is trusted"
        )

    async def convert(self, name: str, spec: ServerConfig) -> str:
        """Have the bridge run the stdio server ``spec`` as ``name``; its streamable HTTP URL.

        Already converted (409) counts as success: the running server's URL. ``cwd`` is not sent (it is a
        path on this machine); ``args`` are sent as they are, so they must make sense on the bridge's host.
        """
        if spec.command is None:
            raise BridgeError(f"only stdio servers can be converted; '{name}' is a {spec.transport} server", 400)
        body = {
            "serverName": name,
            "command": spec.command,
            "args": spec.args,
            "env": spec.env,
            "timeout": spec.timeout,
        }
        with LogSpan("bridge.client.convert", server=name, bridge=public_url(self.url)) as span:
            status, answer = await self._send("POST", "/convert", json=body)
            if status == 409:
                span.add(already=True)
                return await self._running_url(name, answer)
            if status != 201:
                raise self._refused(status, answer, name)
            try:
                return self.served(name, str(answer["url"]))
            except BridgeError:
                with contextlib.suppress(BridgeError):
                    await self.revert(name)  # it started it: stop it, so a refusal leaves nothing changed there
                raise

    async def _running_url(self, name: str, conflict: dict[str, Any]) -> str:
        """The URL of the server a 409 was about: onetool bridge says it; other bridges are asked."""
        if url := conflict.get("url"):
            return self.served(name, str(url))
        current = await self.get(name)
        if current is None:
            raise BridgeUnavailable(f"the bridge said '{name}' was already converted, then that it was not")
        return self.served(name, current.url)

    async def revert(self, name: str) -> bool:
        """Stop ``name`` on the bridge: True when it stopped; False when it was not running there (404)."""
        with LogSpan("bridge.client.revert", server=name, bridge=public_url(self.url)):
            status, answer = await self._send("DELETE", f"/convert/{quote(name, safe='')}")
            if status == 404:
                return False
            if status != 200:
                raise self._refused(status, answer, name)
            return True

    async def get(self, name: str) -> Conversion | None:
        status, answer = await self._send("GET", f"/convert/{quote(name, safe='')}")
        if status == 404:
            return None
        if status != 200:
            raise self._refused(status, answer, name)
        return _conversion(answer)

    async def status(self) -> list[Conversion]:
        """Every server the bridge runs."""
        status, answer = await self._send("GET", "/convert")
        if status != 200:
            raise self._refused(status, answer, None)
        return [_conversion(item) for item in answer.get("servers", [])]

    async def _send(self, method: str, path: str, **kwargs: Any) -> tuple[int, dict[str, Any]]:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        try:
            async with httpx2.AsyncClient(timeout=self._timeout, headers=headers) as http:
                response = await http.request(method, f"{self.url}{path}", **kwargs)
        except httpx2.TimeoutException:
            raise BridgeUnavailable(f"{public_url(self.url)} did not answer within {self._timeout:g} s") from None
        except httpx2.HTTPError as e:
            if (refused := untrusted_certificate(e)) is not None:
                raise BridgeUnavailable(
                    f"the TLS certificate of {public_url(self.url)} is not trusted ({refused}): {TRUST_FIX}"
                ) from None
            raise BridgeUnavailable(f"cannot reach {public_url(self.url)} ({type(e).__name__})") from None
        try:
            answer = response.json()
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise BridgeUnavailable(
                f"{public_url(self.url)} answered {method} {path} with {response.status_code} and no JSON object: "
                "is bridge.url the bridge's address?"
            )
        return response.status_code, answer

    def _refused(self, status: int, answer: dict[str, Any], name: str | None) -> BridgeError:
        where = public_url(self.url)
        said = str(answer.get("error") or f"HTTP {status}")
        if status in (401, 403):
            return BridgeUnavailable(
                f"{where} refused the token ({status}): check bridge.token or $ONETOOL_BRIDGE_TOKEN"
            )
        if status >= 500:
            return BridgeUnavailable(f"{where}: {said}")
        field = answer.get("field")
        return BridgeError(
            f"the bridge at {where} refused '{name}': {said}", status, field=str(field) if field else None
        )


def _conversion(item: Mapping[str, Any]) -> Conversion:
    return Conversion(str(item["serverName"]), str(item["url"]), int(item["port"]), str(item["status"]))
