"""What a face answers about prompts and resources: it has none, and says so with empty lists.

The capabilities are declared and the lists answered (rather than -32601 method not found) because clients list
them at connect, or cache every list a server declares, and some treat a missing method as a broken server. Asking
for one prompt or resource by name is then a bad argument (-32602): none exists.
"""

from __future__ import annotations

from typing import Any

from mcp import MCPError
from mcp.server import ServerRequestContext
from mcp.types import (
    INVALID_PARAMS,
    GetPromptRequestParams,
    GetPromptResult,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    PaginatedRequestParams,
    ReadResourceRequestParams,
    ReadResourceResult,
)

from onetool.text import shown_name

__all__ = ["get_prompt", "list_prompts", "list_resource_templates", "list_resources", "read_resource"]

Ctx = ServerRequestContext[Any, Any]


async def list_prompts(ctx: Ctx, params: PaginatedRequestParams | None) -> ListPromptsResult:
    return ListPromptsResult(prompts=[])


async def get_prompt(ctx: Ctx, params: GetPromptRequestParams) -> GetPromptResult:
    raise MCPError(INVALID_PARAMS, f"Unknown prompt {shown_name(params.name)!r}: OneTool offers no prompts")


async def list_resources(ctx: Ctx, params: PaginatedRequestParams | None) -> ListResourcesResult:
    return ListResourcesResult(resources=[])


async def list_resource_templates(ctx: Ctx, params: PaginatedRequestParams | None) -> ListResourceTemplatesResult:
    return ListResourceTemplatesResult(resource_templates=[])


async def read_resource(ctx: Ctx, params: ReadResourceRequestParams) -> ReadResourceResult:
    raise MCPError(INVALID_PARAMS, f"Unknown resource {shown_name(str(params.uri))!r}: OneTool offers no resources")
