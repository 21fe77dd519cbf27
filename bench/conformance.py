"""The official MCP conformance suite (npm ``@modelcontextprotocol/conformance``) against OneTool, configured as a
user would: one table of scenarios, passed or failed, each marked applicable or not.

- Server scenarios: the suite connects to a ``onetool serve --http`` with no servers. Those that need the suite's
  own test server (its ``test_*`` tools, prompts and resources) cannot apply to a gateway whose one tool is ``run``.
- Client scenarios: the suite starts a test MCP server (and authorization server) per scenario and runs
  ``python -m bench.conformance client URL``, the driver below, which writes an ``onetool.yaml`` for that server
  (an ``oauth:`` block from the scenario's context), runs ``onetool auth srv`` where a browser step is needed (the
  "browser" follows the printed URL), then ``onetool run`` with a snippet that lists the server's tools and calls
  each; when a call asks for ``onetool auth srv`` (a scope step-up), it does so and runs again.

The suite needs Node 22 (``fs.globSync``); ``bench/conformance/package.json`` pins it (the npm package ``node``)
with the suite. ``npm ci --prefix bench/conformance`` installs both; then ``python -m bench.conformance``. Not part
of ``make bench``: it runs ~60 scenarios (a few minutes) and its results are a checklist, not a measure.
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

import yaml

HERE = Path(__file__).parent / "conformance"
NODE = HERE / "node_modules" / ".bin" / "node"
SUITE = HERE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
ONETOOL = Path(sys.executable).parent / "onetool"
SUMMARY = re.compile(r"^[✓✗] (\S+): (\d+) passed, (\d+) failed", re.M)  # a run of several scenarios
SINGLE = re.compile(r"^Passed: (\d+)/(\d+), (\d+) failed", re.M)  # a run of one

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
}
EXPLAINED_CLIENT = {
    "auth/2025-03-26-oauth-metadata-backcompat": "its metadata at the origin names issuer <origin>/oauth: RFC 8414"
    " 3.3 forbids using it, and the mcp SDK refuses it (python-sdk#3398, as the TypeScript and Ruby SDKs do)",
}
"""Why a client scenario fails, where the cause is known; shown only when it fails."""
ARGUMENTS = {"add_numbers": {"a": 2, "b": 3}}
"""Arguments for the tools the client scenarios offer (the others take none)."""


def main() -> None:
    if not SUITE.exists():
        sys.exit(f"the suite is not installed: npm ci --prefix {HERE}")
    rows = server_scenarios() + client_scenarios()
    header = ("side", "scenario", "result", "note")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    for i, row in enumerate([header, *rows]):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))
    for side in ("server", "client"):
        ran = [r for r in rows if r[0] == side]
        applicable = [r for r in ran if not r[3].startswith("not applicable")]
        passed = sum(r[2] == "passed" for r in applicable)
        print(f"{side}: {passed} of {len(applicable)} applicable scenarios pass ({len(ran)} run)")


def server_scenarios() -> list[tuple[str, str, str, str]]:
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "onetool.yaml"
        config.write_text("servers: {}\n")
        env = {**os.environ, "ONETOOL_STATE_DIR": f"{folder}/state", "ONETOOL_RUNTIME_DIR": f"{folder}/run"}
        cmd = [str(ONETOOL), "serve", "--http", "--port", "0", "--config", str(config), "--log-file", f"{folder}/log"]
        gateway = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
        try:
            assert gateway.stdout is not None
            url = gateway.stdout.readline().strip()
            out = suite("server", "--url", url)
        finally:
            gateway.terminate()
            gateway.wait(30)
    return [
        (
            "server",
            name,
            result,
            f"not applicable: {NOT_APPLICABLE_SERVER[name]}" if name in NOT_APPLICABLE_SERVER else "",
        )
        for name, result in outcomes(out)
    ]


def client_scenarios() -> list[tuple[str, str, str, str]]:
    listed = suite("list")
    names = re.findall(r"^\s+- (\S+) \[", listed.split("Client scenarios", 1)[1], re.M)
    driver = f"{sys.executable} -m bench.conformance client"
    rows = []
    for name in names:
        out = suite("client", "--command", driver, "--scenario", name, "--timeout", "60000")
        found = SINGLE.search(out)
        result = "no result" if found is None else _result(int(found[1]), int(found[3]))
        rows.append(("client", name, result, "" if result == "passed" else EXPLAINED_CLIENT.get(name, "")))
    return rows


def suite(*args: str) -> str:
    done = subprocess.run(
        [str(NODE), str(SUITE), *args], cwd=HERE, capture_output=True, text=True, timeout=900, check=False
    )
    return done.stdout + done.stderr


def outcomes(out: str) -> list[tuple[str, str]]:
    return [(m[1], _result(int(m[2]), int(m[3]))) for m in SUMMARY.finditer(out)]


def _result(passed: int, failed: int) -> str:
    return "passed" if failed == 0 else f"failed ({failed} of {passed + failed} checks)"


# ---- the client driver: OneTool configured as a user would --------------------------------------------


def client(url: str) -> None:
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context: dict[str, Any] = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        # The suite's driver has no user: SEP-1034's scenario expects a form of defaults accepted unattended.
        server: dict[str, Any] = {"url": url, "connect_timeout": 20, "unattended_elicitation": "defaults"}
        if scenario.startswith("auth/"):
            server["oauth"] = oauth_block(context, folder)
        config = folder / "onetool.yaml"
        config.write_text(yaml.safe_dump({"servers": {"srv": server}}))
        env = {**os.environ, "ONETOOL_STATE_DIR": f"{folder}/state", "ONETOOL_RUNTIME_DIR": f"{folder}/run"}
        env.pop("DISPLAY", None)
        browser = "oauth" in server and server["oauth"].get("grant", "authorization_code") == "authorization_code"
        if browser:
            authorize(config, env)
        shown = run_snippet(config, env)
        if "onetool auth srv" in shown:  # a step-up the browser step must grant
            authorize(config, env)
            shown = run_snippet(config, env)
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
        grant = (
            "authorization_code"
            if os.environ.get("MCP_CONFORMANCE_SCENARIO") == "auth/pre-registration"
            else ("client_credentials")
        )
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


def run_snippet(config: Path, env: dict[str, str]) -> str:
    snippet = (
        f"args = {ARGUMENTS!r}\n"
        "[(t['name'], proxy.call('srv', t.get('upstream_name', t['name']), args.get(t['name'], {})))"
        " for t in proxy.list_tools(server='srv')]"
    )
    done = subprocess.run(
        [str(ONETOOL), "run", "-c", snippet, "--config", str(config)], env=env, capture_output=True, text=True
    )
    return done.stdout + done.stderr


if __name__ == "__main__":
    if sys.argv[1:2] == ["client"]:
        client(sys.argv[2])
    else:
        main()
