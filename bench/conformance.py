"""The official MCP conformance suite (npm ``@modelcontextprotocol/conformance``) against OneTool, configured as a
user would: one table of scenarios, passed or failed, each marked applicable or not.

- Server scenarios: the suite connects to a ``onetool serve --http`` with no servers. Those that need the suite's
  own test server (its ``test_*`` tools, prompts and resources) cannot apply to a gateway whose one tool is ``run``;
  nor can single checks that need such a tool (``NOT_APPLICABLE_CHECKS``: a scenario whose only failures are those
  passes, with a note).
- Client scenarios: the suite starts a test MCP server (and authorization server) per scenario and runs
  ``python -m bench.conformance client URL``, the driver below, which writes an ``onetool.yaml`` for that server
  (an ``oauth:`` block from the scenario's context; ``dpop: true`` for the DPoP scenarios, whose server takes only
  DPoP-bound tokens; ``unattended_elicitation: defaults``, since nobody answers the elicitation of SEP-1034's
  scenario), runs ``onetool auth srv`` where a browser step is needed (the "browser" follows the printed URL), then
  ``onetool run`` with a snippet that lists the server's tools and calls each (or makes the calls the scenario's
  context names, leaving out a parameter it sets to null); when a call asks for ``onetool auth srv`` (a scope
  step-up), it does so and runs again. json-schema-2020-12-preservation needs a tool's raw input schema, which
  snippets do not see: there the driver is a program on ``onetool serve --mode inspect`` (``inspect`` then ``exec``).
  The authorization server scenarios (newest suite) test an authorization server, which OneTool is not: not run.

Two suites are pinned in ``bench/conformance/package.json``: the current release (npm ``latest``, 0.1.16), run by
``python -m bench.conformance``, and the newest pre-release (0.2.0-alpha.12, installed as ``conformance-next``), run
by ``python -m bench.conformance --next``, which also runs the server scenarios 2026-07-28 requires
(``--requirements 2026-07-28``, at that protocol's wire; the default server run is the 2025-11-25 one). Both need
Node 22 (``fs.globSync``), pinned there too (the npm package ``node``); ``npm ci --prefix bench/conformance``
installs all three. Not part of ``make bench``: a run takes 5 to 10 minutes and its results are a checklist, not a
measure.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

import anyio
import yaml

HERE = Path(__file__).parent / "conformance"
NODE = HERE / "node_modules" / ".bin" / "node"
SUITES = {
    "release": HERE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js",
    "next": HERE / "node_modules" / "conformance-next" / "dist" / "index.js",
}
"""The suite's current release (npm ``latest``) and its newest pre-release, both pinned in package.json."""
NEXT = "--next" in sys.argv[1:]
SUITE = SUITES["next" if NEXT else "release"]
ONETOOL = Path(sys.executable).parent / "onetool"
NOT_APPLICABLE_SERVER = {
    "completion-complete": "needs the suite's test prompt to complete",
    "tools-call-image": "needs the suite's test_image_content tool",
    "tools-call-audio": "needs the suite's test_audio_content tool",
    "tools-call-embedded-resource": "needs the suite's test_embedded_resource tool",
    "tools-call-mixed-content": "needs the suite's test_multiple_content_types tool",
    "tools-call-with-logging": "needs the suite's test_tool_with_logging tool",
    "tools-call-with-progress": "needs the suite's test_tool_with_progress tool",
    "tools-call-sampling": "needs the suite's test_sampling tool",
    "tools-call-elicitation": "needs the suite's test_elicitation tool",
    "elicitation-sep1034-defaults": "needs the suite's elicitation test tool",
    "elicitation-sep1330-enums": "needs the suite's elicitation test tool",
    "resources-read-text": "needs the suite's test resources",
    "resources-read-binary": "needs the suite's test resources",
    "resources-templates-read": "needs the suite's test resource template",
    "resources-subscribe": "needs the suite's test resources",
    "resources-unsubscribe": "needs the suite's test resources",
    "prompts-get-simple": "needs the suite's test prompts",
    "prompts-get-with-args": "needs the suite's test prompts",
    "prompts-get-embedded-resource": "needs the suite's test prompts",
    "prompts-get-with-image": "needs the suite's test prompts",
    # the newest suite's (2026-07-28 and pending scenarios)
    "json-schema-2020-12": "needs the suite's json_schema_2020_12_tool",
    "http-custom-header-server-validation": "needs a tool with x-mcp-header parameters (the suite's own)",
}
NOT_APPLICABLE_FAMILIES = {
    "input-required-result-": "needs the suite's input-required (SEP-2322) test tools and prompt",
    "tasks-": "needs the tasks extension (SEP-2663), which OneTool does not offer, and the suite's task tools",
}
"""Server scenarios that cannot apply, by the prefix of their names."""
NOT_APPLICABLE_CHECKS = {
    "sep-2575-server-rejects-undeclared-capability": "needs the suite's test_missing_capability tool",
    "sep-2575-missing-capability-http-400": "needs the suite's test_missing_capability tool",
}
"""Checks of an otherwise applicable server scenario that cannot apply; the scenario passes if only these fail."""
EXPLAINED_CLIENT = {
    "auth/2025-03-26-oauth-metadata-backcompat": "its metadata at the origin names issuer <origin>/oauth: RFC 8414"
    " 3.3 forbids using it, and the mcp SDK refuses it (python-sdk#3398, as the TypeScript and Ruby SDKs do); the"
    " suite fixed its mock in 0.2.0 (conformance#359, #361)",
}
"""Why a client scenario fails, where the cause is known; shown only when it fails."""
ARGUMENTS = {"add_numbers": {"a": 2, "b": 3}, "valid_tool": {"region": "us-west1"}}
"""Arguments for the tools the client scenarios offer (the others take none, or the scenario names the calls)."""
ECHO, FOCAL = "json_schema_echo", "json_schema_2020_12_tool"
"""json-schema-2020-12-preservation: the driver passes the schema OneTool holds for FOCAL back through ECHO."""
STAMP = re.compile(r"-\d{4}-\d\d-\d\dT[\d-]+Z$")
"""The timestamp the suite appends to a scenario's result folder."""

Row = tuple[str, str, str, str]


def main() -> None:
    if not SUITE.exists():
        sys.exit(f"the suite is not installed: npm ci --prefix {HERE}")
    print(f"suite: {json.loads((SUITE.parent.parent / 'package.json').read_text())['version']}")
    rows = server_scenarios() + client_scenarios()
    header = ("side", "scenario", "result", "note")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    for i, row in enumerate([header, *rows]):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))
    for side in dict.fromkeys(r[0] for r in rows):
        ran = [r for r in rows if r[0] == side]
        applicable = [r for r in ran if not r[3].startswith("not applicable")]
        passed = sum(r[2] == "passed" for r in applicable)
        print(f"{side}: {passed} of {len(applicable)} applicable scenarios pass ({len(ran)} run)")


def server_scenarios() -> list[Row]:
    """The suite's default server run; with --next also the scenarios 2026-07-28 requires, run at that wire."""
    runs = {"server": ()} | ({"server 2026-07-28": ("--requirements", "2026-07-28")} if NEXT else {})
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "onetool.yaml"
        config.write_text("servers: {}\n")
        env = {**os.environ, "ONETOOL_STATE_DIR": f"{folder}/state", "ONETOOL_RUNTIME_DIR": f"{folder}/run"}
        cmd = [str(ONETOOL), "serve", "--http", "--port", "0", "--config", str(config), "--log-file", f"{folder}/log"]
        gateway = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
        try:
            assert gateway.stdout is not None
            url = gateway.stdout.readline().strip()
            for side, extra in runs.items():
                for name, checks in results("server", "--url", url, *extra):
                    rows.append((side, name, *_server_result(name, checks)))
        finally:
            gateway.terminate()
            gateway.wait(30)
    return rows


def _server_result(name: str, checks: list[dict[str, Any]]) -> tuple[str, str]:
    family = next((why for prefix, why in NOT_APPLICABLE_FAMILIES.items() if name.startswith(prefix)), None)
    if (why := NOT_APPLICABLE_SERVER.get(name, family)) is not None:
        return _result(checks), f"not applicable: {why}"
    failed = [c["id"] for c in checks if c["status"] == "FAILURE"]
    excused = sorted({NOT_APPLICABLE_CHECKS[c] for c in failed if c in NOT_APPLICABLE_CHECKS})
    if failed and all(c in NOT_APPLICABLE_CHECKS for c in failed):
        return "passed", f"{len(failed)} checks not applicable: {'; '.join(excused)}"
    return _result(checks), ""


def client_scenarios() -> list[Row]:
    listed = suite("list")
    client_part = listed.split("Client scenarios", 1)[1].split("Authorization server scenarios", 1)[0]
    names = re.findall(r"^\s+- (\S+) \[", client_part, re.M)
    driver = f"{sys.executable} -m bench.conformance client"
    rows = []
    for name in names:
        found = results("client", "--command", driver, "--scenario", name, "--timeout", "60000")
        result = "no result" if not found else _result(found[0][1])
        rows.append(("client", name, result, "" if result == "passed" else EXPLAINED_CLIENT.get(name, "")))
    return rows


def results(*args: str) -> list[tuple[str, list[dict[str, Any]]]]:
    """Each scenario the suite ran, with its checks (from the result folders it writes), in the order it ran."""
    with tempfile.TemporaryDirectory() as folder:
        suite(*args, "--output-dir", folder)
        found = []
        for checks in Path(folder).rglob("checks.json"):
            scenario = checks.parent.relative_to(folder).as_posix()
            stamp = STAMP.search(scenario)
            name = scenario[: stamp.start()] if stamp else scenario
            name = name.removeprefix("server-") if args[0] == "server" else name
            found.append((stamp[0] if stamp else "", name, json.loads(checks.read_text())))
    return [(name, checks) for _, name, checks in sorted(found)]


def suite(*args: str) -> str:
    done = subprocess.run(
        [str(NODE), str(SUITE), *args], cwd=HERE, capture_output=True, text=True, timeout=1800, check=False
    )
    return done.stdout + done.stderr


def _result(checks: list[dict[str, Any]]) -> str:
    failed = sum(c["status"] == "FAILURE" for c in checks)
    scored = sum(c["status"] in ("SUCCESS", "FAILURE") for c in checks)  # as the suite counts: not INFO, WARNING
    return "passed" if failed == 0 else f"failed ({failed} of {scored} checks)"


# ---- the client driver: OneTool configured as a user would --------------------------------------------


def client(url: str) -> None:
    scenario = scenario_name()
    context: dict[str, Any] = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        # The suite's driver has no user: SEP-1034's scenario expects a form of defaults accepted unattended.
        server: dict[str, Any] = {"url": url, "connect_timeout": 20, "unattended_elicitation": "defaults"}
        if scenario.startswith("auth/"):
            server["oauth"] = oauth_block(context, folder)
        if scenario.startswith("auth/dpop"):  # a server that takes only DPoP-bound tokens
            server["oauth"]["dpop"] = True
        config = folder / "onetool.yaml"
        config.write_text(yaml.safe_dump({"servers": {"srv": server}}))
        env = {**os.environ, "ONETOOL_STATE_DIR": f"{folder}/state", "ONETOOL_RUNTIME_DIR": f"{folder}/run"}
        env.pop("DISPLAY", None)
        browser = "oauth" in server and server["oauth"].get("grant", "authorization_code") == "authorization_code"
        if browser:
            authorize(config, env)
        shown = run_snippet(config, env, context)
        if "onetool auth srv" in shown:  # a step-up the browser step must grant
            authorize(config, env)
            shown = run_snippet(config, env, context)
        print(shown)


def oauth_block(context: dict[str, Any], folder: Path) -> dict[str, Any]:
    """The ``oauth:`` block a user would write for the credentials the scenario hands out."""
    if "private_key_pem" in context:
        key = folder / "client.pem"
        key.write_text(context["private_key_pem"])
        return {
            "grant": "client_credentials",
            "client_id": context["client_id"],
            "private_key_file": str(key),
            "signing_algorithm": context.get("signing_algorithm", "RS256"),
        }
    if "valid_jwt" in context:  # workload identity federation: the platform's token, presented as the grant
        assertion = folder / "workload.jwt"
        assertion.write_text(context["valid_jwt"])
        return {"grant": "jwt_bearer", "client_id": context["client_id"], "assertion_file": str(assertion)}
    if "idp_id_token" in context:  # enterprise-managed authorization (SEP-990)
        id_token = folder / "id_token"
        id_token.write_text(context["idp_id_token"])
        idp = {
            "token_endpoint": context["idp_token_endpoint"],
            "client_id": context["idp_client_id"],
            "id_token_file": str(id_token),
        }
        secret = {"client_id": context["client_id"], "client_secret": context["client_secret"]}
        return {"grant": "jwt_bearer", **secret, "identity_provider": idp}
    if "client_secret" in context:
        # the suite's pre-registration scenario is a browser flow; its client-credentials one is not
        grant = "authorization_code" if scenario_name() == "auth/pre-registration" else ("client_credentials")
        block = {"grant": grant, "client_id": context["client_id"], "client_secret": context["client_secret"]}
        return block | ({"client_auth": "client_secret_basic"} if grant == "authorization_code" else {})
    return {}


def authorize(config: Path, env: dict[str, str]) -> None:
    cmd = [str(ONETOOL), "auth", "srv", "--no-browser", "--config", str(config)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    url = next((line.strip() for line in proc.stdout if line.strip().startswith("http")), None)
    if url is not None:
        try:
            urllib.request.urlopen(url, timeout=30).read()  # the browser: the test server approves at once
        except OSError as e:
            print(f"browser step: {e}", file=sys.stderr)
    out, err = proc.communicate(timeout=60)
    print(out, err, file=sys.stderr)


def run_snippet(config: Path, env: dict[str, str], context: dict[str, Any]) -> str:
    """A user's snippet: list the server's tools, then make the scenario's calls (its context's ``toolCalls``), or
    call each tool with the arguments it needs; one failing call does not stop the others."""
    if scenario_name() == "json-schema-2020-12-preservation":
        return anyio.run(echo_schema, config, env)
    calls = None
    if "toolCalls" in context:  # a parameter the scenario sets to null is one the snippet leaves out
        calls = [(c["name"], {k: v for k, v in c["arguments"].items() if v is not None}) for c in context["toolCalls"]]
    snippet = f"""
args = {ARGUMENTS!r}
calls = {calls!r}
tools = proxy.list_tools(server='srv')
listed = {{t['name']: t for t in tools}}
if calls is None:
    calls = [(t['name'], args.get(t['name'], {{}})) for t in tools]
out = []
for name, arguments in calls:
    try:
        out.append((name, proxy.call('srv', listed.get(name, {{}}).get('upstream_name', name), arguments)))
    except Exception as e:
        out.append((name, f'failed: {{e}}'))
out
"""
    done = subprocess.run(
        [str(ONETOOL), "run", "-c", snippet, "--config", str(config)], env=env, capture_output=True, text=True
    )
    return done.stdout + done.stderr


async def echo_schema(config: Path, env: dict[str, str]) -> str:
    """json-schema-2020-12-preservation: a program reads the raw input schema OneTool holds for the focal tool (the
    run face shows snippets typed signatures; the inspect face gives programs the schemas) and passes it back."""
    from mcp import Client, StdioServerParameters

    serve = ["serve", "--mode", "inspect", "--config", str(config)]
    async with Client(StdioServerParameters(command=str(ONETOOL), args=serve, env=env)) as onetool:
        for _ in range(100):  # the gateway connects its servers in the background
            focal = await onetool.call_tool("inspect", {"server_name": "srv", "tool_name": FOCAL})
            if not focal.is_error:
                break
            await anyio.sleep(0.2)
        schema = (focal.structured_content or {})["inputSchema"]
        echoed = await onetool.call_tool(
            "exec", {"server_name": "srv", "tool_name": ECHO, "arguments": {"schema": schema}}
        )
        return echoed.model_dump_json()


def scenario_name() -> str:
    return os.environ.get("MCP_CONFORMANCE_SCENARIO", "")


if __name__ == "__main__":
    if sys.argv[1:2] == ["client"]:
        client(sys.argv[2])
    else:
        main()
