"""``exec``: one tool call through the registry's tool and the pool, and its result shaped for the model.

An upstream tool's arguments are validated against its input schema before anything leaves the gateway (the
error names the argument path and the expected type); the call goes through the pool, so it gets the server's
timeout, cancellation (``notifications/cancelled``) and the ``proxy.tool.call`` log record. A local pack's
function is called as a snippet's call would be. Errors are raised as ModelError for the face to report.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import anyio.to_thread
from mcp import types

from onetool.errors import ModelError, ToolFailed
from onetool.inspect.catalogue import CatalogueTool
from onetool.inspect.toon import data_result, exec_result
from onetool.logs import logger
from onetool.registry import PackContext, UpstreamTool
from onetool.registry.schema import count_nodes

__all__ = ["ON_LOOP_SIZE", "call", "shaped", "value_size"]

ON_LOOP_SIZE = 64 * 1024
"""A result of up to this many characters of text or JSON values is TOON-encoded on the event loop; a larger
one in a worker thread, so one big result does not hold up every other client."""


async def call(
    ctx: PackContext, server: str, tool: CatalogueTool, arguments: dict[str, Any], *, max_chars: int
) -> types.CallToolResult:
    """Call ``tool`` of ``server`` (both as inspect lists them) with ``arguments``."""
    target = tool.tool
    if isinstance(target, UpstreamTool):
        bound = await target.schema.bind(f"{server}.{tool.name}", [], arguments)
        result = await ctx.pool.call(target.server, target.remote_name, bound)
        shape = partial(exec_result, output_schema=target.output_schema)
        return await shaped(shape, result, max_chars, _result_size(result))
    try:
        value = await target.call([], arguments, ctx)
    except ModelError:
        raise
    except Exception as e:  # a local pack's own bug: report it, keep the host's traceback out of the model
        logger.opt(exception=True).warning("local pack {}.{} raised", server, tool.name)
        raise ToolFailed(f"{server}.{tool.name} raised {type(e).__name__}: {e}") from None
    return await shaped(data_result, value, max_chars, value_size(value))


async def shaped(
    shape: Callable[..., types.CallToolResult], value: Any, max_chars: int, size: int
) -> types.CallToolResult:
    """``shape(value, max_chars=max_chars)``, in a worker thread when ``size`` is past ON_LOOP_SIZE."""
    if size <= ON_LOOP_SIZE:
        return shape(value, max_chars=max_chars)
    return await anyio.to_thread.run_sync(lambda: shape(value, max_chars=max_chars))


def value_size(value: Any) -> int:
    """JSON values in ``value``, counted no further than just past ON_LOOP_SIZE."""
    return count_nodes(value, ON_LOOP_SIZE)


def _result_size(result: types.CallToolResult) -> int:
    texts = sum(len(c.text) for c in result.content if isinstance(c, types.TextContent))
    structured = value_size(result.structured_content) if result.structured_content is not None else 0
    return texts + structured
