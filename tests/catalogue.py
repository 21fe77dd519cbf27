"""A realistic catalogue of 50 upstream tools (the shapes of the reference filesystem, memory, GitHub, Slack and
time servers), for measuring the ``run`` description against its budget."""

from __future__ import annotations

from typing import Any

from onetool.registry import Pack, Registry, UpstreamTool
from onetool.registry.schema import ToolSchema

STR: dict[str, Any] = {"type": "string"}
INT: dict[str, Any] = {"type": "integer"}
BOOL: dict[str, Any] = {"type": "boolean"}
STRS: dict[str, Any] = {"type": "array", "items": STR}


def obj(required: dict[str, Any] | None = None, **optional: Any) -> dict[str, Any]:
    """An object schema: ``required`` fields, then keyword ``optional`` ones."""
    props = {**(required or {}), **optional}
    return {"type": "object", "properties": props, "required": list(required or {})}


def listof(item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": item}


def enum(*values: str) -> dict[str, Any]:
    return {"type": "string", "enum": list(values)}


REPO = {"owner": STR, "repo": STR}
PAGE = {"page": INT, "perPage": INT}
ENTITY = obj({"name": STR, "entityType": STR, "observations": STRS})
RELATION = obj({"from": STR, "to": STR, "relationType": STR})
TIME_RESULT = obj({"timezone": STR, "datetime": STR, "day_of_week": STR, "is_dst": BOOL})
LONG = " It handles the usual cases and reports failures with a clear message; see the server's documentation."

CATALOGUE: dict[str, list[tuple[str, dict[str, Any], str, dict[str, Any] | None]]] = {
    "filesystem": [
        (
            "read_file",
            obj({"path": STR}, tail=INT, head=INT),
            "Read the complete contents of a file from the file system.",
            None,
        ),
        ("read_multiple_files", obj({"paths": STRS}), "Read the contents of multiple files simultaneously.", None),
        (
            "write_file",
            obj({"path": STR, "content": STR}),
            "Create a new file or completely overwrite an existing file.",
            None,
        ),
        (
            "edit_file",
            obj({"path": STR, "edits": listof(obj({"oldText": STR, "newText": STR}))}, dryRun=BOOL),
            "Make line-based edits to a text file and return a git-style diff.",
            None,
        ),
        ("create_directory", obj({"path": STR}), "Create a new directory or ensure that it exists.", None),
        ("list_directory", obj({"path": STR}), "Get a detailed listing of all files and directories in a path.", None),
        ("directory_tree", obj({"path": STR}), "Get a recursive tree view of files and directories as JSON.", None),
        ("move_file", obj({"source": STR, "destination": STR}), "Move or rename files and directories.", None),
        (
            "search_files",
            obj({"path": STR, "pattern": STR}, excludePatterns=STRS),
            "Recursively search for files and directories matching a pattern.",
            obj({"content": listof(STR)}),
        ),
        ("get_file_info", obj({"path": STR}), "Retrieve detailed metadata about a file or directory.", None),
        (
            "list_allowed_directories",
            obj(),
            "Returns the list of directories that this server is allowed to access.",
            None,
        ),
    ],
    "memory": [
        (
            "create_entities",
            obj({"entities": listof(ENTITY)}),
            "Create multiple new entities in the knowledge graph.",
            None,
        ),
        (
            "create_relations",
            obj({"relations": listof(RELATION)}),
            "Create multiple new relations between entities.",
            None,
        ),
        (
            "add_observations",
            obj({"observations": listof(obj({"entityName": STR, "contents": STRS}))}),
            "Add new observations to existing entities in the knowledge graph.",
            None,
        ),
        (
            "delete_entities",
            obj({"entityNames": STRS}),
            "Delete multiple entities and their associated relations.",
            None,
        ),
        (
            "delete_observations",
            obj({"deletions": listof(obj({"entityName": STR, "observations": STRS}))}),
            "Delete specific observations from entities in the knowledge graph.",
            None,
        ),
        (
            "delete_relations",
            obj({"relations": listof(RELATION)}),
            "Delete multiple relations from the knowledge graph.",
            None,
        ),
        ("read_graph", obj(), "Read the entire knowledge graph.", None),
        ("search_nodes", obj({"query": STR}), "Search for nodes in the knowledge graph based on a query.", None),
        ("open_nodes", obj({"names": STRS}), "Open specific nodes in the knowledge graph by their names.", None),
    ],
    "github": [
        (
            "create_or_update_file",
            obj({**REPO, "path": STR, "content": STR, "message": STR, "branch": STR}, sha=STR),
            "Create or update a single file in a GitHub repository.",
            None,
        ),
        ("search_repositories", obj({"query": STR}, **PAGE), "Search for GitHub repositories.", None),
        (
            "create_repository",
            obj({"name": STR}, description=STR, private=BOOL, autoInit=BOOL),
            "Create a new GitHub repository.",
            None,
        ),
        ("get_file_contents", obj({**REPO, "path": STR}, branch=STR), "Get the contents of a file or directory.", None),
        (
            "push_files",
            obj({**REPO, "branch": STR, "files": listof(obj({"path": STR, "content": STR})), "message": STR}),
            "Push multiple files to a GitHub repository in a single commit.",
            None,
        ),
        (
            "create_issue",
            obj({**REPO, "title": STR}, body=STR, assignees=STRS, labels=STRS, milestone=INT),
            "Create a new issue in a GitHub repository.",
            None,
        ),
        (
            "create_pull_request",
            obj({**REPO, "title": STR, "head": STR, "base": STR}, body=STR, draft=BOOL),
            "Create a new pull request in a GitHub repository.",
            None,
        ),
        (
            "fork_repository",
            obj(REPO, organization=STR),
            "Fork a GitHub repository to your account or an organization.",
            None,
        ),
        (
            "create_branch",
            obj({**REPO, "branch": STR}, from_branch=STR),
            "Create a new branch in a GitHub repository.",
            None,
        ),
        ("list_commits", obj(REPO, sha=STR, **PAGE), "Get a list of commits of a branch in a GitHub repository.", None),
        (
            "list_issues",
            obj(REPO, state=enum("open", "closed", "all"), labels=STRS, since=STR, **PAGE),
            "List issues in a GitHub repository with filtering options.",
            None,
        ),
        (
            "update_issue",
            obj({**REPO, "issue_number": INT}, title=STR, body=STR, state=enum("open", "closed"), labels=STRS),
            "Update an existing issue in a GitHub repository.",
            None,
        ),
        (
            "add_issue_comment",
            obj({**REPO, "issue_number": INT, "body": STR}),
            "Add a comment to an existing issue.",
            None,
        ),
        ("search_code", obj({"q": STR}, **PAGE), "Search for code across GitHub repositories.", None),
        (
            "search_issues",
            obj({"q": STR}, **PAGE),
            "Search for issues and pull requests across GitHub repositories.",
            None,
        ),
        ("search_users", obj({"q": STR}, **PAGE), "Search for users on GitHub.", None),
        (
            "get_issue",
            obj({**REPO, "issue_number": INT}),
            "Get details of a specific issue in a GitHub repository.",
            None,
        ),
        ("get_pull_request", obj({**REPO, "pull_number": INT}), "Get details of a specific pull request.", None),
        (
            "list_pull_requests",
            obj(REPO, state=enum("open", "closed", "all"), base=STR, **PAGE),
            "List and filter repository pull requests.",
            None,
        ),
        (
            "merge_pull_request",
            obj({**REPO, "pull_number": INT}, commit_title=STR, merge_method=enum("merge", "squash", "rebase")),
            "Merge a pull request.",
            None,
        ),
    ],
    "slack": [
        (
            "slack_list_channels",
            obj(limit=INT, cursor=STR),
            "List public channels in the workspace with pagination.",
            None,
        ),
        ("slack_post_message", obj({"channel_id": STR, "text": STR}), "Post a new message to a Slack channel.", None),
        (
            "slack_reply_to_thread",
            obj({"channel_id": STR, "thread_ts": STR, "text": STR}),
            "Reply to a specific message thread in Slack.",
            None,
        ),
        (
            "slack_add_reaction",
            obj({"channel_id": STR, "timestamp": STR, "reaction": STR}),
            "Add a reaction emoji to a message.",
            None,
        ),
        ("slack_get_channel_history", obj({"channel_id": STR}, limit=INT), "Get recent messages from a channel.", None),
        (
            "slack_get_thread_replies",
            obj({"channel_id": STR, "thread_ts": STR}),
            "Get all replies in a message thread.",
            None,
        ),
        (
            "slack_get_users",
            obj(cursor=STR, limit=INT),
            "Get a list of all users in the workspace with their basic profile.",
            None,
        ),
        (
            "slack_get_user_profile",
            obj({"user_id": STR}),
            "Get detailed profile information for a specific user.",
            None,
        ),
    ],
    "time": [
        ("get_current_time", obj({"timezone": STR}), "Get current time in a specific timezone.", TIME_RESULT),
        (
            "convert_time",
            obj({"source_timezone": STR, "time": STR, "target_timezone": STR}),
            "Convert time between timezones.",
            obj({"source": TIME_RESULT, "target": TIME_RESULT, "time_difference": STR}),
        ),
    ],
}


def upstream_tool(pack: str, name: str, schema: dict[str, Any], description: str, output: Any = None) -> UpstreamTool:
    tool_schema = ToolSchema(schema)
    return UpstreamTool(
        pack=pack,
        name=name,
        description=description,
        signature=tool_schema.signature(f"{pack}.{name}", returns=output),
        server=pack,
        remote_name=name,
        schema=tool_schema,
        output_schema=output,
    )


def catalogue(copies: int = 1) -> Registry:
    """The 50 tools; with ``copies`` > 1, that many renamed copies of every pack (``github_2``, ...)."""
    packs = {}
    for copy in range(1, copies + 1):
        for base, tools in CATALOGUE.items():
            name = base if copy == 1 else f"{base}_{copy}"
            packs[name] = Pack(
                name=name,
                tools={t[0]: upstream_tool(name, t[0], t[1], t[2] + LONG, t[3]) for t in tools},
                server=name,
            )
    return Registry(packs)
