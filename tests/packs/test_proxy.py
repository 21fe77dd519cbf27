"""onetool-proxy-spec scenarios, end to end: an MCP client -> `onetool serve --http` -> real upstreams."""

from __future__ import annotations

import base64

import pytest

from tests.gateways import ServedGateway, text_of

pytestmark = pytest.mark.anyio


# ---- Proxy Server Lifecycle -------------------------------------------------------------------


async def test_startup_connects_enabled_servers_and_survives_a_failing_one(gateway: ServedGateway) -> None:
    result = await gateway.run("{s['name']: (s['status'], s['type'], s['enabled']) for s in proxy.list_servers()}")
    assert not result.is_error, text_of(result)
    assert result.structured_content["result"] == {
        "brave": ["connected", "stdio", True],
        "time": ["connected", "stdio", True],
        "fx": ["connected", "stdio", True],
        "broken-server": ["failed", "stdio", True],
        "off": ["disabled", "stdio", False],
    }
    log = gateway.log.read_text()
    assert "WARNING" in log and "broken-server" in log


async def test_failed_server_reports_why(gateway: ServedGateway) -> None:
    result = await gateway.run("[s for s in proxy.list_servers() if s['name'] == 'broken-server'][0]")
    server = result.structured_content["result"]
    # What failed and what to change, without host paths (the search PATH, the venv) or stderr.
    assert server["error"] == "command not found: mcp-server"
    assert server["fix"] == (
        "set servers.broken-server.command to the server's executable (a full path, or a name on PATH)"
    )
    assert "/nonexistent" not in text_of(result) and ".venv" not in text_of(result)


# ---- Pack Tool Access -------------------------------------------------------------------------


async def test_simple_proxied_call(gateway: ServedGateway) -> None:
    result = await gateway.run('time.get_current_time(timezone="Europe/Paris")')
    assert not result.is_error, text_of(result)
    assert result.structured_content["result"]["timezone"] == "Europe/Paris"


async def test_multiple_arguments_reach_the_tool(gateway: ServedGateway) -> None:
    result = await gateway.run("brave.get_sum(a=19, b=23)")
    assert "42" in text_of(result)
    positional = await gateway.run("brave.get_sum(19, 23)")
    assert text_of(positional) == text_of(result)


async def test_unknown_pack_lists_available_packs(gateway: ServedGateway) -> None:
    result = await gateway.run("unknown.some_tool()")
    assert result.is_error
    text = text_of(result)
    assert "unknown pack 'unknown'" in text
    for pack in ("brave", "time", "proxy", "broken_server"):
        assert pack in text
    assert "line 1" in text


async def test_unknown_tool_lists_tools_closest_first(gateway: ServedGateway) -> None:
    result = await gateway.run("x = 1\ntime.get_current_tim(timezone='UTC')")
    assert result.is_error
    text = text_of(result)
    assert "has no tool 'get_current_tim'" in text
    assert "did you mean get_current_time?" in text
    assert "convert_time" in text
    assert "line 2" in text


async def test_unknown_tool_found_only_at_run_time(gateway: ServedGateway) -> None:
    result = await gateway.run("name = 'nonexistent'\ngetattr(time, name)()")
    assert result.is_error
    assert "has no tool 'nonexistent'. Its tools: " in text_of(result)  # two sentences, not run together


async def test_bad_arguments_are_reported_before_running(gateway: ServedGateway) -> None:
    result = await gateway.run("print('side effect')\ntime.get_current_time(zone='UTC')")
    assert result.is_error
    text = text_of(result)
    assert "unknown argument 'zone'" in text and "time.get_current_time(timezone: str)" in text
    assert "side effect" not in text  # nothing ran
    missing = await gateway.run("time.get_current_time()")
    assert "missing required argument 'timezone'" in text_of(missing)


async def test_wrong_type_is_caught_before_the_upstream(gateway: ServedGateway) -> None:
    result = await gateway.run("brave.get_sum(a=1, b='two')")
    assert result.is_error
    assert '"two" is not of type "number"' in text_of(result)


async def test_multiple_calls_in_one_run_combine(gateway: ServedGateway) -> None:
    code = (
        "now = time.get_current_time(timezone='UTC')\n"
        "total = brave.get_sum(a=1, b=2)\n"
        "{'tz': now['timezone'], 'sum': total}"
    )
    result = await gateway.run(code)
    assert not result.is_error, text_of(result)
    assert result.structured_content["result"]["tz"] == "UTC"
    assert "3" in str(result.structured_content["result"]["sum"])


async def test_the_specs_own_chain_reads_a_result_field_as_an_attribute(gateway: ServedGateway) -> None:
    # The spec's `notion.search(query=sites[0].name)`: a JSON object from one call feeds the next by attribute.
    code = (
        "sites = brave.web_search(query='shop', count=2)\n"
        "now = time.get_current_time(timezone='UTC')\n"
        "brave.echo(message=sites[0].title + ' @ ' + now.timezone)"
    )
    result = await gateway.run(code)
    assert not result.is_error, text_of(result)
    assert result.structured_content["result"] == "local echo: shop #1 @ UTC"


# ---- Local Tool Precedence --------------------------------------------------------------------


async def test_local_pack_wins_on_collision(gateway: ServedGateway) -> None:
    result = await gateway.run("brave.echo(message='hi')")
    assert text_of(result) == "local echo: hi"


async def test_upstream_tools_of_a_shadowed_pack_stay_reachable(gateway: ServedGateway) -> None:
    result = await gateway.run("brave.get_sum(a=2, b=2)")
    assert not result.is_error and "4" in text_of(result)


async def test_no_collision_uses_the_proxied_tool(gateway: ServedGateway) -> None:
    result = await gateway.run("time.convert_time(source_timezone='UTC', time='12:00', target_timezone='Asia/Tokyo')")
    assert not result.is_error, text_of(result)
    assert result.structured_content["result"]["target"]["timezone"] == "Asia/Tokyo"


async def test_shadowing_is_shown_by_list_tools_and_logged(gateway: ServedGateway) -> None:
    result = await gateway.run(
        "{t['name']: (t['source'], t.get('shadows_upstream', False)) for t in proxy.list_tools(server='brave')}"
    )
    tools = result.structured_content["result"]
    assert tools["echo"] == ["local", True]
    assert tools["web_search"] == ["local", False]
    assert tools["get_sum"] == ["upstream", False]
    assert "local tools win" in gateway.log.read_text()


# ---- Proxy Introspection ----------------------------------------------------------------------


async def test_list_tools_gives_signatures(gateway: ServedGateway) -> None:
    result = await gateway.run("proxy.list_tools(server='time')")
    tools = {t["name"]: t for t in result.structured_content["result"]}
    assert set(tools) == {"get_current_time", "convert_time"}
    assert tools["get_current_time"]["signature"] == (
        "time.get_current_time(timezone: str) -> {timezone: str, datetime: str, day_of_week: str, is_dst: bool}"
    )
    assert tools["get_current_time"]["description"]


async def test_list_tools_unknown_server_names_the_servers(gateway: ServedGateway) -> None:
    result = await gateway.run("proxy.list_tools(server='nonexistent')")
    assert result.is_error
    text = text_of(result)
    assert "unknown server 'nonexistent'" in text
    for name in ("brave", "time", "broken-server", "off"):
        assert name in text


async def test_proxy_call_reaches_tools_by_their_upstream_name(gateway: ServedGateway) -> None:
    result = await gateway.run("proxy.call('brave', 'get-sum', {'a': 5, 'b': 6})")
    assert "11" in text_of(result)


# ---- Async Proxy Execution --------------------------------------------------------------------


async def test_async_local_tool(gateway: ServedGateway) -> None:
    result = await gateway.run("[r['rank'] for r in brave.web_search('mcp', count=2)]")
    assert result.structured_content["result"] == [1, 2]


async def test_local_tool_arguments_are_type_checked(gateway: ServedGateway) -> None:
    result = await gateway.run("brave.web_search('mcp', count='many')")
    assert result.is_error
    text = text_of(result)
    assert "brave.web_search(query: str, count: int = 3): argument 'count'" in text and "valid integer" in text


async def test_upstream_timeout_is_reported_and_catchable(gateway: ServedGateway) -> None:
    code = (
        "try:\n"
        "    brave.trigger_long_running_operation(duration=10, steps=10)\n"
        "except ToolTimeout as e:\n"
        "    caught = str(e)\n"
        "caught"
    )
    result = await gateway.run(code)
    assert not result.is_error, text_of(result)
    text = text_of(result)
    # Named as the snippet wrote it, with the key to raise; caught by its kind.
    assert text == (
        "brave.trigger_long_running_operation timed out after 3.0 s and was cancelled; "
        "if it needs longer, raise servers.brave.timeout"
    )
    # the connection stays usable afterwards
    assert "3" in text_of(await gateway.run("brave.get_sum(a=1, b=2)"))


async def test_uncaught_tool_error_fails_the_run(gateway: ServedGateway) -> None:
    result = await gateway.run("time.get_current_time(timezone='Not/AZone')")
    assert result.is_error
    text = text_of(result)
    assert "ToolError" in text and "Not/AZone" in text and "line 1" in text


async def test_local_pack_bug_becomes_a_tool_error(gateway: ServedGateway) -> None:
    result = await gateway.run("broken_helper.divide(1, 0)")
    assert result.is_error
    assert "broken_helper.divide raised ZeroDivisionError" in text_of(result)
    assert "Traceback" not in text_of(result)


async def test_unavailable_servers_fail_at_once(gateway: ServedGateway) -> None:
    for code, name, advice in (
        ("broken_server.anything()", "broken-server", "set servers.broken-server.command to the server's executable"),
        ("off.anything()", "off", None),
    ):
        result = await gateway.run(code)
        assert result.is_error
        assert result.structured_content["error"]["type"] == "ToolUnavailable"
        assert f"server '{name}' is unavailable" in text_of(result)
        # Retry advice is for transient failures (tests/upstream); a missing command says what to fix instead,
        # and a server disabled in the config gets neither.
        assert "retry later" not in text_of(result)
        assert advice is None or advice in text_of(result)


async def test_a_failed_server_is_a_catchable_error_at_the_call(gateway: ServedGateway) -> None:
    """The pre-check never rejects a call to a failed server: only running the call fails, catchably."""
    code = "\n".join(
        [
            "if False:",
            "    broken_server.never_called()",
            "try:",
            "    broken_server.get_current_time(timezone='UTC')",
            "except ToolUnavailable as e:",
            "    caught = ['ToolUnavailable', isinstance(e, ToolError), str(e)]",
            "caught",
        ]
    )
    result = await gateway.run(code)
    assert not result.is_error, text_of(result)
    kind, is_tool_error, message = result.structured_content["result"]
    assert (kind, is_tool_error) == ("ToolUnavailable", True)
    assert message.startswith("server 'broken-server' is unavailable: command not found")


# ---- Results ----------------------------------------------------------------------------------


async def test_strings_stay_strings_and_lists_stay_lists(gateway: ServedGateway) -> None:
    result = await gateway.run("x = brave.echo(message='007')\n['007', x, [1, 2]]")
    assert result.structured_content["result"] == ["007", "local echo: 007", [1, 2]]


async def test_structured_content_preferred(gateway: ServedGateway) -> None:
    result = await gateway.run("brave.get_structured_content(location='New York')")
    assert not result.is_error, text_of(result)
    assert isinstance(result.structured_content["result"], dict)


async def test_python_sdk_result_envelope_is_unwrapped(gateway: ServedGateway) -> None:
    result = await gateway.run("total = fx.add(a=2, b=3)\n[total, isinstance(total, int)]")
    assert result.structured_content["result"] == [5, True]


async def test_large_results_are_cut_with_a_note(gateway: ServedGateway) -> None:
    result = await gateway.run("'x' * 300000")
    assert not result.is_error
    text = text_of(result)
    # The default cut (sandbox.max_output) stays under what clients accept (Claude Code warns at 10k tokens).
    assert len(text) < 40_200
    assert "cut: showing 40,000 of 300,000 characters" in text
    assert result.structured_content["truncated"] is True


async def test_images_pass_through_as_content(gateway: ServedGateway) -> None:
    result = await gateway.run("brave.get_tiny_image()")
    assert not result.is_error, text_of(result)
    images = [c for c in result.content if c.type == "image"]
    assert len(images) == 1
    assert images[0].mime_type == "image/png"
    base64.b64decode(images[0].data, validate=True)


async def test_printed_output_is_returned(gateway: ServedGateway) -> None:
    result = await gateway.run("print('hello')\n1 + 1")
    assert [c.text for c in result.content] == ["hello\n", "2"]


async def test_syntax_error_has_line_and_column(gateway: ServedGateway) -> None:
    result = await gateway.run("x = 1\ny = (2,\n")
    assert result.is_error
    assert "SyntaxError: '(' was never closed (line 2, column 5: y = (2,)" in text_of(result)
    assert result.structured_content is not None
    error = result.structured_content["error"]
    assert (error["type"], error["line"], error["column"]) == ("SyntaxError", 2, 5)
    # What only the compiler sees has its place too, without the compiler's own "(<snippet>, line 1)".
    compiled = await gateway.run("x = 1\nreturn x")
    assert compiled.structured_content is not None
    assert compiled.structured_content["error"] == {
        "type": "SyntaxError",
        "message": "'return' outside function",
        "origin": "code",
        "line": 2,
        "column": 1,
        "source": "return x",
    }


# ---- Resources, prompts, instructions (beyond tools) ---------------------------------------------


async def test_resource_links_a_tool_returns_can_be_read(gateway: ServedGateway) -> None:
    code = "\n".join(
        [
            "links = [p for p in brave.get_resource_links(count=2) if isinstance(p, dict) and 'uri' in p]",
            "contents = proxy.read_resource('brave', links[0]['uri'])",
            "[len(links), links[0]['uri'] == contents[0]['uri'], 'text' in contents[0] or 'blob' in contents[0]]",
        ]
    )
    result = await gateway.run(code)
    assert not result.is_error, text_of(result)
    assert result.structured_content["result"] == [2, True, True]


async def test_resources_and_prompts_are_listed_and_fetched(gateway: ServedGateway) -> None:
    code = "\n".join(
        [
            "resources = proxy.list_resources('brave')",
            "doc = [r for r in resources if r['name'] == 'architecture.md'][0]",
            "text = proxy.read_resource('brave', doc['uri'])[0]['text']",
            "prompts = [p['name'] for p in proxy.list_prompts('brave')]",
            "filled = proxy.get_prompt('brave', 'args-prompt', {'city': 'Paris', 'state': 'IDF'})",
            "[doc['mimeType'], text.startswith('# Everything Server'), 'simple-prompt' in prompts,",
            " filled['messages'][0]['role'], 'Paris' in filled['messages'][0]['content']['text']]",
        ]
    )
    result = await gateway.run(code)
    assert not result.is_error, text_of(result)
    assert result.structured_content["result"] == ["text/markdown", True, True, "user", True]


async def test_resource_and_prompt_errors_are_catchable(gateway: ServedGateway) -> None:
    code = "\n".join(
        [
            "out = []",
            "for call in (lambda: proxy.list_prompts('nope'), lambda: proxy.get_prompt('brave', 'no-such-prompt')):",
            "    try:",
            "        call()",
            "    except ToolError as e:",
            "        out.append(str(e))",
            "out",
        ]
    )
    result = await gateway.run(code)
    assert not result.is_error, text_of(result)
    unknown, missing = result.structured_content["result"]
    assert unknown == "unknown server 'nope'; servers: brave, broken-server, fx, off, time"
    assert missing.startswith("proxy.get_prompt('brave', 'no-such-prompt') failed:")


async def test_servers_show_their_instructions(gateway: ServedGateway) -> None:
    result = await gateway.run("{s['name']: s['instructions'] for s in proxy.list_servers()}")
    instructions = result.structured_content["result"]
    assert instructions["fx"] == "fault fixture server, mode ok"
    assert instructions["brave"].startswith("# Everything Server")
