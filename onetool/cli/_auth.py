"""`onetool auth`: the OAuth authorization-code flow, through the running gateway or a loopback listener."""

from __future__ import annotations

import argparse
import datetime
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from onetool.attach.admin import Target
    from onetool.config import Config

from onetool.cli._common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, attach_failed, count, locate, print_table, setup

AUTH_WAIT = 660.0
"""How long `onetool auth` waits on a gateway's flow: it expires there after 10 minutes, and then says so."""
AUTH_POLL = 30  # seconds per long-poll of the flow's outcome


def cmd_auth(args: argparse.Namespace) -> int:
    import anyio

    from onetool.errors import AttachError, NotRunning

    config = setup(args, "WARNING")
    oauth = {name: s for name, s in config.servers.items() if s.oauth is not None}
    if args.server == "status" and "status" not in oauth:  # `onetool auth status`, unless a server is named so
        args.status, args.server = True, None
    if args.status:
        if args.server or args.logout:
            print("onetool auth: --status takes no server and no --logout", file=sys.stderr)
            return EXIT_USAGE
        return _auth_status(config, oauth)
    if args.server and not args.logout:
        # A running gateway runs the flow itself: its callback receives the redirect, and it reconnects the server.
        try:
            target = locate(args)
            if target is not None:
                return _authorize_attached(target, args.server, not args.no_browser)
        except NotRunning:
            pass  # a stale discovery file: authorize here
        except AttachError as e:
            return attach_failed("auth", e)
    if not args.server or args.server not in oauth:
        known = ", ".join(oauth) or "none (add an oauth: block to an HTTP server)"
        what = f"'{args.server}' is not a server with an oauth block" if args.server else "name a server"
        print(f"onetool auth: {what}; OAuth servers: {known}", file=sys.stderr)
        return EXIT_USAGE
    if args.logout:
        forgot = anyio.run(_forget_tokens, config, args.server, oauth[args.server])
        print(
            f"server '{args.server}': " + ("tokens and client registration forgotten" if forgot else "nothing stored")
        )
        return EXIT_OK
    return int(anyio.run(_authorize, config, args.server, oauth[args.server], not args.no_browser))


def _authorize_attached(target: Target, name: str, browser: bool) -> int:
    import time

    from onetool.attach.admin import server_path
    from onetool.errors import AttachError

    path = server_path(name, "authorize")
    try:
        started = target.request("POST", path)
        _show_authorization_url(name, started["authorization_url"], browser)
        deadline = time.monotonic() + AUTH_WAIT
        outcome = started
        while outcome["status"] == "pending" and time.monotonic() < deadline:
            outcome = target.request("GET", f"{path}?wait={AUTH_POLL}")
    except AttachError as e:
        return attach_failed("auth", e)
    if outcome["status"] == "pending":
        print(
            f"onetool auth: server '{name}': no answer from the browser; run `onetool auth {name}` again",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if outcome["status"] == "failed":
        print(f"onetool auth: {outcome['error']}", file=sys.stderr)
        return EXIT_FAILED
    tools = count(outcome["tool_count"], "tool")
    print(f"server '{name}': authorized; {tools} (reconnected by the gateway at {target.origin})")
    return EXIT_OK


def _show_authorization_url(name: str, url: str, browser: bool) -> None:
    from onetool.auth.login import open_browser

    print(f"Open this URL in a browser to authorize OneTool for server '{name}':\n\n  {url}\n", flush=True)
    opened = browser and open_browser(url)
    print(("(opened in your browser) " if opened else "") + "Waiting for the redirect...", flush=True)


def _auth_status(config: Config, servers: dict[str, Any]) -> int:
    """Per OAuth server: its grant, whether its tokens are DPoP-bound, its oauth_status after a connect attempt, the
    scopes granted, when the access token expires and was last refreshed, and what is wrong. Never a token, a secret
    or a key."""
    import anyio

    from onetool.auth import ServerStorage, StateTokenStore, resolve_flow
    from onetool.auth.store import store_for
    from onetool.state import StateStore
    from onetool.upstream import UpstreamPool

    if not servers:
        print("no OAuth servers configured")
        return EXIT_OK

    async def go() -> None:
        async with await StateStore.open(config.store_url) as store:
            tokens = StateTokenStore(store)
            enabled = {n: s for n, s in servers.items() if s.enabled}
            async with UpstreamPool(enabled, token_store=tokens) as pool:
                connected = {s.name: s for s in pool.status()}
            table = [("NAME", "GRANT", "DPOP", "OAUTH", "SCOPES", "EXPIRES", "REFRESHED", "ERROR")]
            for name, server in servers.items():
                url = server.url or ""
                record = await ServerStorage(store_for(name, server.oauth, url, tokens), name, url).record()
                status = connected.get(name)
                error = status.report if status is not None and not status.connected else ""
                if not error and record.wanted_scope:
                    error = f"a call needs scope '{record.wanted_scope}'; run `onetool auth {name}`"
                granted = record.tokens is not None
                table.append(
                    (
                        name,
                        resolve_flow(name, server.oauth),
                        "true" if server.oauth.dpop else "false",
                        (status.oauth_status if status is not None else None) or "disabled",
                        (record.tokens.scope if record.tokens is not None else None) or "-",
                        _when(record.expires_at) if granted else "-",
                        _when(record.refreshed_at) if granted else "-",
                        error,
                    )
                )
            print_table(table)

    anyio.run(go)
    return EXIT_OK


def _when(epoch: float | None) -> str:
    if epoch is None:
        return "never"
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


async def _forget_tokens(config: Config, name: str, server: Any) -> bool:
    from onetool.auth import StateTokenStore
    from onetool.auth.store import store_for
    from onetool.state import StateStore

    async with await StateStore.open(config.store_url) as store:
        return await store_for(name, server.oauth, server.url or "", StateTokenStore(store)).forget(name)


async def _authorize(config: Config, name: str, server: Any, browser: bool) -> int:
    from onetool.auth import PendingFlows, StateTokenStore, no_browser_step, resolve_flow
    from onetool.auth.login import loopback_listener
    from onetool.auth.store import store_for
    from onetool.errors import AuthError
    from onetool.state import StateStore
    from onetool.upstream.authorize import authorize

    if (machine := no_browser_step(name, resolve_flow(name, server.oauth))) is not None:
        print(f"{machine} (see onetool auth --status)")
        return EXIT_OK

    async def show(url: str) -> None:
        _show_authorization_url(name, url, browser)

    pending = PendingFlows()
    async with await StateStore.open(config.store_url) as state:
        store = StateTokenStore(state)
        stored = await store_for(name, server.oauth, server.url or "", store).load(name)
        reuse = stored.client.redirect_uris[0] if stored and stored.client and stored.client.redirect_uris else None
        try:
            async with loopback_listener(
                pending, server.oauth.redirect_uri, reuse=str(reuse) if reuse else None
            ) as uri:
                done = await authorize(name, server, store, pending=pending, redirect_uri=uri, show=show)
        except AuthError as e:
            print(f"onetool auth: {e}", file=sys.stderr)
            return EXIT_FAILED
    print(f"server '{name}': authorized; {count(done.tool_count, 'tool')}")
    return EXIT_OK
