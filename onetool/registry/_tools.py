"""One callable tool as a snippet sees it, ``pack.name(...)``: what it is, and what is checked before a call.

A :class:`LocalTool` is a function of a local pack, run in the gateway (``await tool.call(args, kwargs, ctx)``);
an :class:`UpstreamTool` is a tool of a proxied MCP server, called through the pool by :mod:`onetool.core.calls`.
Both check a call's arguments, and raise a :class:`~onetool.errors.ModelError` whose message is meant for the
model. A :class:`Pack` holds the tools of one name a snippet uses (a server's, a local pack's, or both).
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import anyio.to_thread
from pydantic import BaseModel, ValidationError
from pydantic_core import to_jsonable_python

from onetool.errors import ArgumentError, ToolFailed
from onetool.registry._summary import brief, summarize
from onetool.registry.results import error_text, to_value
from onetool.registry.schema import ToolSchema, count_nodes

if TYPE_CHECKING:
    from mcp import types


MAX_LOCAL_VALUES = 20_000
"""JSON values a local pack tool's arguments may hold: its annotations are checked on the event loop."""

CTX = "ctx"
"""The parameter through which a local tool receives its :class:`~onetool.core.calls.PackContext`; snippets never
pass it."""


@dataclass(frozen=True)
class Tool(ABC):
    pack: str
    name: str
    description: str
    signature: str
    """``pack.name(a: str, b: int = 3)``: what the model reads in listings and errors."""

    source: ClassVar[Literal["local", "upstream"]]

    @property
    def summary(self) -> str:
        """The description's first sentence, with any deprecation or warning it carries."""
        return summarize(self.description)

    def purpose(self, limit: int) -> str:
        """The summary in at most about ``limit`` characters, any deprecation or warning first."""
        return brief(self.summary, limit)

    @property
    @abstractmethod
    def params(self) -> str:
        """Parameter names in call order, ``?`` after optional ones (``path, head?``): the shortest signature."""

    @abstractmethod
    def check_shape(self, positional: int, names: list[str]) -> None:
        """Raise ArgumentError for what a call site shows without values: argument count and names."""


@dataclass(frozen=True)
class UpstreamTool(Tool):
    server: str
    remote_name: str
    schema: ToolSchema
    output_schema: Mapping[str, Any] | None = None
    annotations: Mapping[str, Any] | None = None

    source: ClassVar[Literal["upstream"]] = "upstream"

    @property
    def params(self) -> str:
        return self.schema.params()

    def check_shape(self, positional: int, names: list[str]) -> None:
        self.schema.check_shape(self.signature, positional, names)

    def value(self, result: types.CallToolResult) -> Any:
        """What a snippet gets from this tool's ``result``: its plain value, or a ToolFailed for ``isError``."""
        if result.is_error:
            raise ToolFailed(f"{self.pack}.{self.name} failed: {error_text(result)}")
        return to_value(result, self.output_schema)


@dataclass(frozen=True)
class LocalTool(Tool):
    func: Callable[..., Any] = field(repr=False)
    parameters: inspect.Signature = field(repr=False)
    """The function's signature without ``ctx``: what a snippet may pass."""
    wants_ctx: bool = False
    arguments: type[BaseModel] | None = field(default=None, repr=False)
    """Checks (and coerces) argument types against the annotations; None when they cannot be checked."""

    source: ClassVar[Literal["local"]] = "local"

    @property
    def params(self) -> str:
        return ", ".join(_param(p) for p in self.parameters.parameters.values())

    def check_shape(self, positional: int, names: list[str]) -> None:
        try:
            self.parameters.bind(*[None] * positional, **dict.fromkeys(names))
        except TypeError as e:
            raise ArgumentError(f"{self.signature}: {e}") from None

    async def call(self, args: list[Any], kwargs: dict[str, Any], ctx: object) -> Any:
        """Call with a snippet's arguments, ``ctx`` passed on when the function declares it: plain JSON-able
        data, or a ModelError."""
        try:
            bound = self.parameters.bind(*args, **kwargs)
        except TypeError as e:
            raise ArgumentError(f"{self.signature}: {e}") from None
        if self.arguments is not None:
            # Arguments come from model-written code: check (and coerce) them against the annotations, on the
            # event loop, so within a bound (pydantic's core takes well under a microsecond a value).
            if count_nodes(bound.arguments, MAX_LOCAL_VALUES) > MAX_LOCAL_VALUES:
                raise ArgumentError(
                    f"{self.signature}: the arguments hold more than {MAX_LOCAL_VALUES:,} values; pass less data"
                )
            try:
                checked = self.arguments.model_validate(bound.arguments)
            except ValidationError as e:
                first = e.errors(include_url=False)[0]
                where = ".".join(str(p) for p in first["loc"])
                raise ArgumentError(f"{self.signature}: argument {where!r}: {first['msg']}") from None
            bound.arguments.update({name: getattr(checked, name) for name in self.arguments.model_fields})
        extra = {CTX: ctx} if self.wants_ctx else {}
        if inspect.iscoroutinefunction(self.func):
            value = await self.func(*bound.args, **bound.kwargs, **extra)
        else:
            # A sync pack function may block; keep the event loop (and every other run) responsive.
            call = partial(self.func, *bound.args, **bound.kwargs, **extra)
            value = await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
        return to_jsonable_python(value, fallback=repr)


def _param(p: inspect.Parameter) -> str:
    if p.kind is p.VAR_POSITIONAL:
        return f"*{p.name}"
    if p.kind is p.VAR_KEYWORD:
        return f"**{p.name}"
    return p.name if p.default is p.empty else f"{p.name}?"


@dataclass(frozen=True)
class Pack:
    name: str
    tools: Mapping[str, Tool]
    server: str | None = None
    """The configured server behind it, if any."""
    shadowed: Mapping[str, UpstreamTool] = field(default_factory=dict)
    """Upstream tools hidden by local tools of the same name."""

    def listing(self) -> dict[str, Any]:
        """What ``onetool tools`` shows of it, as JSON data (the admin API's ``GET /admin/tools`` answers it)."""
        tools = [{"name": name, "signature": t.signature, "summary": t.summary} for name, t in self.tools.items()]
        return {"name": self.name, "server": self.server, "tools": tools}
