"""Upstream prompts, resources and resource templates, as every MCP face lists, reads, subscribes to and completes
them (one CatalogueItems per gateway, :func:`items_of`; what each face tells its clients: :mod:`._item_updates`).

Names. A prompt is listed as ``server<separator>prompt`` (:func:`onetool.serve._names.namespaced`: the scheme the
direct face names tools by, ``http.direct_separator`` between), and ``prompts/get`` maps that name back. A resource
keeps its upstream URI, because URIs also travel inside tool results (resource links) and clients read them back
as they got them; a read is routed by the URIs the servers list, else by their URI templates (RFC 6570 expressions
matched as patterns). URIs cannot be renamed freely, so the one other form is reversible: ``onetool://<server>/<the
URI percent-encoded>`` (:func:`alias`), which every face accepts for any URI of any visible server and maps back
exactly. A resource is listed in that form when another server lists the same URI, or when its URI holds a
character a reader could not see whole (:func:`shown_uri`); a URI two servers' templates match must be asked for in
that form. A resource's and a template's name gets the server's prefix; a template whose URI template holds such a
character is not listed (its resources read by the alias). A prompt argument's name is listed escaped and mapped
back to the upstream's own.

Visibility is the tools': a server no face may show tools of (disabled, not connected, quarantined, proposed,
unknown to a store a replica cannot read) lists no prompts and no resources, and none of its items can be got,
read, subscribed to or completed; naming one of a server held for review says it is held, as a tool call does.

What an upstream wrote reaches a client shaped: names, titles and descriptions with every invisible character named
(:func:`onetool.text.visible`; an OSC 52 escape, a CR or a bidi override shows as ``<U+001B CONTROL>``),
descriptions cut at _MAX_DESCRIPTION; the texts of a prompt's messages and of a resource's contents escaped the same
way (tab and newline kept) and cut together at ``sandbox.max_output`` characters, as a tool result is; a binary past
_MAX_BLOB_CHARS replaced by a note; an upstream's error message escaped and cut on one line.

Lists are cached per server and kind until the registry changes (a server comes, goes or changes) or the server
says that list changed (:meth:`CatalogueItems.forget`); the merged list is served in pages of PAGE_SIZE behind an
opaque cursor. Resource subscriptions are held upstream once per resource (:meth:`CatalogueItems.hold`), however
many clients share one, and held again on a reconnected server's new session (:meth:`CatalogueItems.renew`).
"""

from __future__ import annotations

import base64
import binascii
import re
import weakref
from collections.abc import Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, TypeVar
from urllib.parse import quote, unquote

import anyio
from anyio.abc import ObjectReceiveStream
from mcp import Client, MCPError
from mcp.server import ServerRequestContext
from mcp.types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    SERVER_INFO_META_KEY,
    BlobResourceContents,
    CompleteRequestParams,
    CompleteResult,
    Completion,
    ContentBlock,
    EmbeddedResource,
    EmptyResult,
    GetPromptRequestParams,
    GetPromptResult,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    PaginatedRequestParams,
    Prompt,
    PromptArgument,
    PromptMessage,
    PromptReference,
    ReadResourceRequestParams,
    ReadResourceResult,
    Resource,
    ResourceLink,
    ResourceTemplate,
    ResourceTemplateReference,
    ServerCapabilities,
    ServerNotification,
    SubscribeRequest,
    SubscribeRequestParams,
    TextContent,
    TextResourceContents,
    UnsubscribeRequest,
    UnsubscribeRequestParams,
)
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from onetool.errors import ModelError
from onetool.logs import logger
from onetool.registry import Registry
from onetool.serve._names import namespaced
from onetool.text import closest, cut, mcp_name, one_line, shown_name, visible

if TYPE_CHECKING:
    from onetool.serve._host import FaceHost

__all__ = ["ALIAS_SCHEME", "PAGE_SIZE", "CatalogueItems", "alias", "items_of", "shown_uri"]

Ctx = ServerRequestContext[Any, Any]
Kind = Literal["prompts", "resources", "templates"]
T = TypeVar("T")
S = TypeVar("S")

PAGE_SIZE = 100
"""Items per page of a merged list."""
ALIAS_SCHEME = "onetool"
_MAX_DESCRIPTION = 2_000
"""Characters of an upstream's description of a prompt, argument, resource or template a client is shown."""
_MAX_ITEMS = 10_000
"""Items of one kind kept per server: a server that lists millions costs no more than this."""
LIST_WAIT = 5.0
"""Seconds one listing waits for a server's prompts, resources or templates. A server slower than that (or hung)
is left out of that listing, said in a WARNING, and left out of the next ones for HUNG_RETRY: one such server does
not hold every client's listing for its whole call timeout, nor each listing for LIST_WAIT."""
HUNG_RETRY = 60.0
"""Seconds a server that did not answer a listing within LIST_WAIT is left out of listings without being asked, unless
it says that list changed or the catalogue changes first: a hung server costs one wait a minute, not one a listing."""
_MAX_BLOB_CHARS = 4 * 1024 * 1024
"""Base64 characters of one binary content passed on (3 MiB); a larger one is replaced by a note."""
_MAX_COMPLETIONS = 100
"""Values of one completion: the protocol's own bound."""
_MAX_URI = 8_192
"""Characters of a URI routed; a longer one is refused before any matching."""
_MAX_ERROR = 1_000
_MAX_HELD = 1_000
"""Upstream resource subscriptions one gateway holds for its clients at most."""


def alias(server: str, uri: str) -> str:
    """The URI under which ``server``'s resource ``uri`` can always be read here, whoever else lists ``uri``."""
    return f"{ALIAS_SCHEME}://{mcp_name(server)}/{quote(uri, safe='')}"


def shown_uri(server: str, uri: str) -> str:
    """``uri`` itself, or its :func:`alias` when a reader could not see it whole (a control or bidi character, a
    terminal escape) or it is too long to route: the alias is plain ASCII and reads back the same resource."""
    return uri if _plain(uri) else alias(server, uri)


def _plain(uri: str) -> bool:
    return visible(uri[:_MAX_URI], keep="") == uri


_SHARED: weakref.WeakKeyDictionary[FaceHost, CatalogueItems] = weakref.WeakKeyDictionary()


def items_of(gateway: FaceHost) -> CatalogueItems:
    """The one CatalogueItems of ``gateway``: its faces share the cache and the upstream subscriptions."""
    items = _SHARED.get(gateway)
    if items is None:
        items = _SHARED[gateway] = CatalogueItems(gateway)
    return items


class CatalogueItems:
    """The prompts, resources and templates of the visible upstreams, shared by every face of one gateway."""

    def __init__(self, gateway: FaceHost) -> None:
        self._gateway = gateway
        self._cache: dict[tuple[str, Kind], list[Any]] = {}
        self._seen: Registry | None = None
        # How often each (server, kind) was forgotten: a list fetched across a change is not cached.
        self._forgotten: dict[tuple[str, Kind], int] = {}
        self._hung: dict[tuple[str, Kind], float] = {}  # (server, kind) -> when it is asked again
        self._held: dict[tuple[str, str], int] = {}  # (server, upstream URI) -> subscribers here
        self._declared: dict[str, ServerCapabilities | None] = {}  # what each server's held session declared
        self._holding = anyio.Lock()
        self._made: dict[Kind, tuple[Any, dict[str, list[Any]], Any]] = {}  # kind -> (key, lists, shaped)

    @property
    def _separator(self) -> str:
        return self._gateway.config.http.direct_separator

    def notices(self) -> AbstractAsyncContextManager[ObjectReceiveStream[tuple[str, ServerNotification]]]:
        """What the upstreams announce (:meth:`onetool.core.gateway.Gateway.notices`)."""
        return self._gateway.notices()

    # ----- what is visible ------------------------------------------------------------------------

    def servers(self, kind: Literal["prompts", "resources"]) -> list[str]:
        """The servers whose ``kind`` a face shows: visible as their tools are, and declaring that capability."""
        out = []
        for status in self._gateway.registry.servers():  # those shown, in the pool's order
            capabilities = self._gateway.pool.capabilities(status.name)
            if capabilities is not None and getattr(capabilities, kind) is not None:
                out.append(status.name)
        return out

    def forget(self, server: str, kinds: Iterable[Kind]) -> None:
        """Drop what is cached of ``server``'s ``kinds``: it said they changed."""
        for kind in kinds:
            self._cache.pop((server, kind), None)
            self._hung.pop((server, kind), None)
            self._forgotten[server, kind] = self._forgotten.get((server, kind), 0) + 1

    async def _lists(self, kind: Kind) -> dict[str, list[Any]]:
        registry = self._gateway.registry
        if registry is not self._seen:  # a server came, went or changed: its lists may have too
            self._cache.clear()
            self._hung.clear()
            self._seen = registry
        servers = self.servers("prompts" if kind == "prompts" else "resources")
        lists = {s: self._cache[s, kind] for s in servers if (s, kind) in self._cache}
        now = anyio.current_time()
        missing = [s for s in servers if s not in lists and self._hung.get((s, kind), now) <= now]
        if missing:
            async with anyio.create_task_group() as tg:
                for server in missing:
                    tg.start_soon(self._fetch, server, kind, lists)
        return {s: lists.get(s, []) for s in servers}

    async def _fetch(self, server: str, kind: Kind, into: dict[str, list[Any]]) -> None:
        """``server``'s list of ``kind`` into ``into``, and into the cache unless it changed meanwhile."""
        pool = self._gateway.pool
        fetches: dict[Kind, Callable[[str], Awaitable[list[Any]]]] = {
            "prompts": pool.list_prompts,
            "resources": pool.list_resources,
            "templates": pool.list_resource_templates,
        }
        seen = (self._gateway.registry, self._forgotten.get((server, kind), 0))
        # Listed without it this time; asked again next time.
        try:
            with anyio.fail_after(LIST_WAIT):
                items = (await fetches[kind](server))[:_MAX_ITEMS]
        except TimeoutError:
            self._hung[server, kind] = anyio.current_time() + HUNG_RETRY
            logger.bind(server=server).warning(
                "server '{}': its {} are not listed: no answer within {} s; not asked again for {:g} s unless it "
                "says they changed",
                server,
                kind,
                LIST_WAIT,
                HUNG_RETRY,
            )
            return
        except ModelError as e:
            logger.bind(server=server).warning("server '{}': its {} are not listed: {}", server, kind, e)
            return
        into[server] = items
        if (self._gateway.registry, self._forgotten.get((server, kind), 0)) == seen:
            self._cache[server, kind] = items

    # ----- prompts --------------------------------------------------------------------------------

    async def prompts(self) -> tuple[list[Prompt], dict[str, tuple[str, Prompt]]]:
        """Every visible prompt as listed, and each listed name -> (server, the upstream's prompt)."""
        return self._shaped("prompts", await self._lists("prompts"), self._shape_prompts)

    def _shape_prompts(self, lists: dict[str, list[Any]]) -> tuple[list[Prompt], dict[str, tuple[str, Prompt]]]:
        pairs: dict[tuple[str, str], Prompt] = {}
        for server, prompts in lists.items():
            for p in prompts:
                pairs.setdefault((server, p.name), p)
        names = namespaced(pairs, self._separator)
        routes = {name: (server, pairs[server, upstream]) for name, (server, upstream) in names.items()}
        return [_prompt(name, prompt) for name, (_, prompt) in routes.items()], routes

    def _shaped(self, kind: Kind, lists: dict[str, list[Any]], shape: Callable[[dict[str, list[Any]]], S]) -> S:
        """``shape(lists)``, computed again only when a list (or the separator) is not the one it was made from:
        a listing or a lookup escapes and names each item once per change, not once per request."""
        key = (self._separator, tuple((server, id(items)) for server, items in lists.items()))
        made = self._made.get(kind)
        if made is None or made[0] != key:
            # The lists are kept with the key: while they live, no other list can take one's id.
            made = self._made[kind] = (key, lists, shape(lists))
        return made[2]

    async def list_prompts(self, ctx: Ctx, params: PaginatedRequestParams | None) -> ListPromptsResult:
        listed, _ = await self.prompts()
        page, cursor = _page(listed, params)
        return ListPromptsResult(prompts=page, next_cursor=cursor)

    async def get_prompt(self, ctx: Ctx, params: GetPromptRequestParams) -> GetPromptResult:
        server, prompt = await self._prompt_route(params.name)
        arguments = {_argument(prompt, k): v for k, v in (params.arguments or {}).items()}
        send = partial(_get_prompt, prompt.name, arguments)
        result = await self._ask(server, f"prompts/get '{prompt.name}'", send, retry=True)
        budget = _Budget(self._gateway.config.sandbox.max_output)
        uri_of = partial(shown_uri, server)
        messages = [PromptMessage(role=m.role, content=_content(m.content, budget, uri_of)) for m in result.messages]
        return GetPromptResult(
            description=_description(result.description), messages=messages, _meta=_unstamped(result.meta)
        )

    async def _prompt_route(self, name: str) -> tuple[str, Prompt]:
        _, names = await self.prompts()
        route = names.get(name)
        if route is None:
            self._refuse_held(lambda held: name.startswith(mcp_name(held) + self._separator))
            close = closest(name, names)
            hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise MCPError(
                INVALID_PARAMS,
                f"Unknown prompt {shown_name(name)!r}.{hint} Prompts are named server{self._separator}prompt; servers "
                f"with prompts now: {', '.join(self.servers('prompts')) or 'none'} (prompts/list has them all).",
            )
        return route

    # ----- resources ------------------------------------------------------------------------------

    async def resources(self) -> tuple[list[Resource], dict[str, tuple[str, str]]]:
        """Every visible resource as listed, and each listed URI -> (server, the upstream's URI); but one whose URI
        is longer than _MAX_URI."""
        return self._shaped("resources", await self._lists("resources"), self._shape_resources)

    def _shape_resources(self, lists: dict[str, list[Any]]) -> tuple[list[Resource], dict[str, tuple[str, str]]]:
        owners: dict[str, set[str]] = {}
        for server, resources in lists.items():
            for r in resources:
                owners.setdefault(r.uri, set()).add(server)
        listed: list[Resource] = []
        routes: dict[str, tuple[str, str]] = {}
        for server, resources in lists.items():
            for r in resources:
                if len(r.uri) > _MAX_URI:
                    continue
                uri = r.uri if len(owners[r.uri]) == 1 else alias(server, r.uri)
                uri = shown_uri(server, uri)
                if uri not in routes:
                    routes[uri] = (server, r.uri)
                    listed.append(_resource(uri, self._named(server, r.name), r))
        return listed, routes

    async def templates(self) -> list[tuple[str, ResourceTemplate]]:
        """Every visible resource template, with its server; but one whose template a reader could not see whole
        (a control or bidi character): what it matches is read by the gateway's form of its URIs."""
        lists = await self._lists("templates")
        return [(server, t) for server, ts in lists.items() for t in ts if _plain(t.uri_template)]

    async def list_resources(self, ctx: Ctx, params: PaginatedRequestParams | None) -> ListResourcesResult:
        listed, _ = await self.resources()
        page, cursor = _page(listed, params)
        return ListResourcesResult(resources=page, next_cursor=cursor)

    async def list_resource_templates(
        self, ctx: Ctx, params: PaginatedRequestParams | None
    ) -> ListResourceTemplatesResult:
        listed = [_template(self._named(server, t.name), t) for server, t in await self.templates()]
        page, cursor = _page(listed, params)
        return ListResourceTemplatesResult(resource_templates=page, next_cursor=cursor)

    async def read_resource(self, ctx: Ctx, params: ReadResourceRequestParams) -> ReadResourceResult:
        server, upstream = await self.route(params.uri)
        result = await self._ask(server, "resources/read", partial(_read, upstream), retry=True)
        budget = _Budget(self._gateway.config.sandbox.max_output)
        # Its own URI as the client named it; any other (a sub-resource) as a listing would: a read routes it back.
        contents = [
            _contents(c, budget, params.uri if c.uri == upstream else shown_uri(server, c.uri)) for c in result.contents
        ]
        return ReadResourceResult(contents=contents, _meta=_unstamped(result.meta))

    async def route(self, uri: str) -> tuple[str, str]:
        """(server, the upstream's URI) of a URI a client names: an alias, a listed URI or one a template matches."""
        # The gateway's form of a URI is up to 3 characters per byte of it (%XX).
        limit = 12 * _MAX_URI if uri.startswith(f"{ALIAS_SCHEME}://") else _MAX_URI
        if len(uri) > limit:
            raise MCPError(INVALID_PARAMS, f"resource URI of {len(uri):,} characters: at most {limit:,} are read")
        servers = self.servers("resources")
        if uri.startswith(f"{ALIAS_SCHEME}://"):
            self._refuse_held(lambda held: uri.startswith(f"{ALIAS_SCHEME}://{mcp_name(held)}/"))
        aliased = _unalias(uri, servers)
        if aliased is not None:
            return aliased
        _, routes = await self.resources()
        if uri in routes:
            return routes[uri]
        listing = {server for server, upstream in routes.values() if upstream == uri}  # listed under aliases
        matching = sorted(listing | {server for server, t in await self.templates() if _matcher(t.uri_template)(uri)})
        if len(matching) == 1:
            return matching[0], uri
        if matching:
            forms = ", ".join(repr(alias(s, uri)) for s in matching)
            raise MCPError(
                INVALID_PARAMS, f"resource {shown_name(uri)!r} is offered by several servers; name one: {forms}"
            )
        raise MCPError(
            INVALID_PARAMS,
            f"Unknown resource {shown_name(uri)!r}: no visible server lists it or has a template it matches "
            f"(resources/list, resources/templates/list); servers with resources now: {', '.join(servers) or 'none'}. "
            f"Any server's URI can be read as {ALIAS_SCHEME}://<server>/<URI percent-encoded>.",
        )

    # ----- subscriptions and completion -----------------------------------------------------------

    async def hold(self, server: str, upstream: str) -> None:
        """One more subscriber to ``server``'s resource ``upstream``: the first has the server asked for
        ``notifications/resources/updated`` about it (an MCPError when it refuses)."""
        key = (server, upstream)
        async with self._holding:
            if key not in self._held:
                if len(self._held) >= _MAX_HELD:
                    raise MCPError(INTERNAL_ERROR, f"this gateway holds {_MAX_HELD:,} resource subscriptions already")
                await self._subscribe(server, upstream)
            self._held[key] = self._held.get(key, 0) + 1

    async def _subscribe(self, server: str, upstream: str) -> None:
        """Ask ``server`` for the updates of ``upstream``: on its listen stream (2026-07-28, the filter of the
        stream the pool holds), else by ``resources/subscribe`` on its session."""
        if self._modern(server):
            await self._watch(server, upstream, on=True)
        else:
            request = SubscribeRequest(params=SubscribeRequestParams(uri=upstream))
            await self._ask(server, "resources/subscribe", partial(_send_empty, request), retry=True)
        self._declared[server] = self._gateway.pool.capabilities(server)

    def _modern(self, server: str) -> bool:
        return self._gateway.pool.server_status(server).protocol_version in MODERN_PROTOCOL_VERSIONS

    async def _watch(self, server: str, upstream: str, *, on: bool) -> None:
        try:
            await self._gateway.pool.watch_resource(server, upstream, on=on)
        except ModelError as e:
            raise _escaped(e) from None
        except TimeoutError:
            raise MCPError(INTERNAL_ERROR, f"server '{server}' did not open its listen stream in time") from None

    async def renew(self) -> None:
        """Subscribe again to what a server forgot by reconnecting: a new session holds no subscriptions. A new
        session is known by its capabilities, which each session declares anew (:meth:`UpstreamPool.capabilities`)."""
        async with self._holding:
            for server, upstream in list(self._held):
                declared = self._gateway.pool.capabilities(server)
                if declared is None or declared is self._declared.get(server):
                    continue  # not connected (it is renewed when it is), or the session it was held on
                try:
                    await self._subscribe(server, upstream)
                except MCPError as e:
                    logger.bind(server=server).warning(
                        "server '{}': a resource subscription not renewed after a reconnect: {}",
                        server,
                        e.error.message,
                    )

    async def release(self, server: str, upstream: str) -> None:
        """One subscriber fewer; the last has the server unsubscribed (a server gone meanwhile needs nothing)."""
        key = (server, upstream)
        async with self._holding:
            left = self._held.get(key, 0) - 1
            if left > 0:
                self._held[key] = left
                return
            if self._held.pop(key, None) is None:
                return
            try:
                if self._modern(server):
                    await self._watch(server, upstream, on=False)
                else:
                    request = UnsubscribeRequest(params=UnsubscribeRequestParams(uri=upstream))
                    await self._ask(server, "resources/unsubscribe", partial(_send_empty, request), retry=False)
            except MCPError as e:
                logger.bind(server=server).debug("server '{}': not unsubscribed: {}", server, e.error.message)

    async def complete(self, ctx: Ctx, params: CompleteRequestParams) -> CompleteResult:
        """``completion/complete`` for a listed prompt's argument or a template's, asked of its server."""
        ref = params.ref
        if isinstance(ref, PromptReference):
            server, prompt = await self._prompt_route(ref.name)
            upstream_ref: PromptReference | ResourceTemplateReference = PromptReference(name=prompt.name)
            argument = {"name": _argument(prompt, params.argument.name), "value": params.argument.value}
        else:
            owners = sorted({s for s, t in await self.templates() if t.uri_template == ref.uri})
            if len(owners) != 1:
                why = "several servers have" if owners else "no visible server has"
                raise MCPError(
                    INVALID_PARAMS,
                    f"{why} the resource template {shown_name(ref.uri)!r} (resources/templates/list has them)",
                )
            server, upstream_ref = owners[0], ResourceTemplateReference(uri=ref.uri)
            argument = {"name": params.argument.name, "value": params.argument.value}
        context = params.context.arguments if params.context is not None else None
        send = partial(_complete, upstream_ref, argument, context)
        result = await self._ask(server, "completion/complete", send, retry=True)
        offered = result.completion.values
        values = [_line(v[: _MAX_DESCRIPTION + 1]) for v in offered[:_MAX_COMPLETIONS]]
        more = result.completion.has_more or len(offered) > _MAX_COMPLETIONS
        return CompleteResult(
            completion=Completion(values=values, total=result.completion.total, has_more=more or None)
        )

    async def _ask(self, server: str, display: str, send: Callable[[Client], Awaitable[T]], *, retry: bool) -> T:
        """A request to ``server``, its failure an MCP error whose message (the upstream's words) is escaped."""
        try:
            return await self._gateway.pool.request(server, f"{display} on '{server}'", send, retry=retry)
        except ModelError as e:
            raise _escaped(e) from None

    def _refuse_held(self, names: Callable[[str], bool]) -> None:
        """A server an operator holds for review is said to be held, as its tools are, not unknown."""
        registry = self._gateway.registry
        for server in sorted(registry.held, key=len, reverse=True):
            if names(server) and (refused := registry.sight_server(server).refusal()) is not None:
                raise MCPError(INVALID_PARAMS, str(refused))

    def _named(self, server: str, name: str) -> str:
        return f"{server}{self._separator}{_line(name)}"


# ----- shaping: what an upstream wrote, as a client is shown it ---------------------------------------------


def _escaped(error: ModelError) -> MCPError:
    """A request's failure as an MCP error whose message (often the upstream's words) is escaped and cut."""
    return MCPError(INTERNAL_ERROR, one_line(visible(str(error)[:_MAX_ERROR], keep=""), _MAX_ERROR))


def _unstamped(meta: dict[str, Any] | None) -> dict[str, Any] | None:
    """An upstream result's ``_meta`` less the 2026 era's ``serverInfo`` stamp, which names the upstream: the
    answer is OneTool's (the SDK stamps ours)."""
    rest = {k: v for k, v in (meta or {}).items() if k != SERVER_INFO_META_KEY}
    return rest or None


def _line(text: str) -> str:
    """A name or title: one line, every invisible character named, bounded."""
    return visible(one_line(text, _MAX_DESCRIPTION), keep="")


def _description(text: str | None) -> str | None:
    return None if text is None else visible(cut(text[: _MAX_DESCRIPTION + 1], _MAX_DESCRIPTION, "description"))


def _argument(prompt: Prompt, name: str) -> str:
    """The upstream's name of ``prompt``'s argument a client names as listed (escaped, when it had to be)."""
    return next((a.name for a in prompt.arguments or [] if _line(a.name) == name), name)


def _prompt(name: str, prompt: Prompt) -> Prompt:
    arguments = [
        PromptArgument(
            name=_line(a.name),
            title=_line(a.title) if a.title else None,
            description=_description(a.description),
            required=a.required,
        )
        for a in prompt.arguments or []
    ]
    return Prompt(
        name=name,
        title=_line(prompt.title) if prompt.title else None,
        description=_description(prompt.description),
        arguments=arguments or None,
        icons=prompt.icons,
        _meta=prompt.meta,
    )


R = TypeVar("R", Resource, ResourceLink)


def _resource(uri: str, name: str, resource: R) -> R:
    return resource.model_copy(
        update={
            "uri": uri,
            "name": name,
            "title": _line(resource.title) if resource.title else None,
            "description": _description(resource.description),
        }
    )


def _template(name: str, template: ResourceTemplate) -> ResourceTemplate:
    return template.model_copy(
        update={
            "name": name,
            "title": _line(template.title) if template.title else None,
            "description": _description(template.description),
        }
    )


class _Budget:
    """The characters of text one answer may still show: its texts are cut together, as a tool result's are."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.left = limit

    def text(self, text: str) -> str:
        shown = cut(text, max(self.left, 0), "text", f"the gateway shows {self.limit:,} characters of an answer")
        self.left -= len(text)
        return visible(shown)


def _content(content: ContentBlock, budget: _Budget, uri_of: Callable[[str], str]) -> ContentBlock:
    if isinstance(content, TextContent):
        return content.model_copy(update={"text": budget.text(content.text)})
    if isinstance(content, EmbeddedResource):
        return content.model_copy(
            update={"resource": _contents(content.resource, budget, uri_of(content.resource.uri))}
        )
    if isinstance(content, ResourceLink):
        return _resource(uri_of(content.uri), _line(content.name), content)
    if len(content.data) > _MAX_BLOB_CHARS:  # an image or audio
        return TextContent(type="text", text=_blob_note(content.mime_type, len(content.data)))
    return content


def _contents(
    contents: TextResourceContents | BlobResourceContents, budget: _Budget, uri: str
) -> TextResourceContents | BlobResourceContents:
    if isinstance(contents, TextResourceContents):
        return contents.model_copy(update={"uri": uri, "text": budget.text(contents.text)})
    if len(contents.blob) > _MAX_BLOB_CHARS:
        return TextResourceContents(
            uri=uri, mime_type="text/plain", text=_blob_note(contents.mime_type, len(contents.blob))
        )
    return contents.model_copy(update={"uri": uri})


def _blob_note(mime_type: str | None, chars: int) -> str:
    kind = _line(mime_type) if mime_type else "binary"
    return (
        f"[{kind} content of about {chars * 3 // 4:,} bytes left out: the gateway passes on at most "
        f"{_MAX_BLOB_CHARS * 3 // 4:,} bytes of one binary content]"
    )


# ----- pages, aliases and templates -----------------------------------------------------------------------


def _page(items: list[T], params: PaginatedRequestParams | None) -> tuple[list[T], str | None]:
    start = _offset(params.cursor if params is not None else None)
    end = start + PAGE_SIZE
    return items[start:end], _cursor(end) if end < len(items) else None


def _cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"onetool-page:{offset}".encode()).decode()


def _offset(cursor: str | None) -> int:
    if cursor is None:
        return 0
    try:
        prefix, _, number = base64.urlsafe_b64decode(cursor[:64].encode()).decode().partition(":")
        if prefix == "onetool-page" and number.isdigit():
            return int(number)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        pass
    raise MCPError(INVALID_PARAMS, f"invalid cursor {shown_name(cursor)!r}: pass the nextCursor of the previous page")


def _unalias(uri: str, servers: list[str]) -> tuple[str, str] | None:
    prefix = f"{ALIAS_SCHEME}://"
    if not uri.startswith(prefix):
        return None
    host, _, rest = uri[len(prefix) :].partition("/")
    for server in servers:
        if mcp_name(server) == host:
            return server, unquote(rest)
    raise MCPError(
        INVALID_PARAMS,
        f"no visible server '{shown_name(host)}' has resources; "
        f"servers with resources now: {', '.join(servers) or 'none'}",
    )


_EXPRESSION = re.compile(r"\{([+#./;?&]?)[^}]*\}")


def _matcher(template: str) -> Callable[[str], bool]:
    """Whether a URI is one ``template`` (RFC 6570) expands to, its expressions matched loosely."""
    pattern: list[str] = []
    last = 0
    for m in _EXPRESSION.finditer(template[:_MAX_URI]):
        pattern.append(re.escape(template[last : m.start()]))
        operator = m.group(1)
        if operator in ("+", "#"):
            pattern.append(".*")  # reserved expansion: slashes included
        elif operator in ("?", "&"):
            pattern.append(r"(?:[?&][^#]*)?")
        else:
            pattern.append(r"[^/?#]*")
        last = m.end()
    pattern.append(re.escape(template[last:_MAX_URI]))
    return re.compile("".join(pattern), re.DOTALL).fullmatch  # type: ignore[return-value]


# ----- the requests themselves --------------------------------------------------------------------------------


async def _get_prompt(name: str, arguments: dict[str, str], client: Client) -> GetPromptResult:
    return await client.get_prompt(name, arguments)


async def _read(uri: str, client: Client) -> ReadResourceResult:
    return await client.read_resource(uri)


async def _send_empty(request: SubscribeRequest | UnsubscribeRequest, client: Client) -> EmptyResult:
    # Sent as it is: the SDK's own methods warn that the 2026 era dropped them, and these servers are 2025-era.
    return await client.session.send_request(request, EmptyResult)


async def _complete(
    ref: PromptReference | ResourceTemplateReference,
    argument: dict[str, str],
    context: dict[str, str] | None,
    client: Client,
) -> CompleteResult:
    return await client.complete(ref, argument, context)
