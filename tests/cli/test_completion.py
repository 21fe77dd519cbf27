"""`onetool completion bash|zsh|fish`: each script is valid for its shell and, run by that shell, completes what
the parser has: commands, `servers` actions, options, an option's choices, files after --config."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from onetool.cli import build_parser
from tests.admin_api import cli
from tests.conftest import PYTHON, TIME_SERVER
from tests.gateways import ONETOOL, write_config


def script(shell: str) -> str:
    done = cli("completion", shell)
    assert done.returncode == 0, done.stderr
    return done.stdout


def run_shell(shell: str, code: str, cwd: Path) -> list[str]:
    """What ``code`` prints, run by ``shell`` in ``cwd``, with this checkout's onetool first on PATH (a script asks
    the onetool of the command line for server names)."""
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed (.ci/run installs it)")
    env = {
        **{k: v for k, v in os.environ.items() if k != "ONETOOL_CONFIG"},
        "PATH": f"{Path(ONETOOL).parent}{os.pathsep}{os.environ['PATH']}",
    }
    done = subprocess.run([shell, "-c", code], capture_output=True, text=True, timeout=30, cwd=cwd, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def commands() -> list[str]:
    parser = build_parser()
    [sub] = [a for a in parser._actions if a.dest == "command"]
    return sorted(sub.choices)  # type: ignore[arg-type]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_each_script_is_valid_for_its_shell(shell: str, tmp_path: Path) -> None:
    (tmp_path / "script").write_text(script(shell))
    run_shell(shell, "true", tmp_path)  # skips without the shell
    done = subprocess.run([shell, "-n", str(tmp_path / "script")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def bash_complete(tmp_path: Path, *line: str) -> list[str]:
    """What bash offers with the cursor after ``line`` (its last word being typed)."""
    (tmp_path / "script").write_text(script("bash"))
    words = " ".join(f"'{word}'" for word in ("onetool", *line))
    code = (
        f"source ./script; COMP_WORDS=({words}); COMP_CWORD={len(line)}; _onetool; "
        'for w in "${COMPREPLY[@]}"; do echo "$w"; done'
    )
    return run_shell("bash", code, tmp_path)


def test_bash_completes_from_the_parser(tmp_path: Path) -> None:
    assert sorted(bash_complete(tmp_path, "")) == sorted([*commands(), "-h", "--help", "--version"])
    assert bash_complete(tmp_path, "servers", "ap") == ["approve"]
    assert bash_complete(tmp_path, "serve", "--mode", "") == ["run", "inspect"]
    # `run` after --mode is the option's value, not the `run` command: serve's options still come.
    assert bash_complete(tmp_path, "serve", "--mode", "run", "--h") == ["--help", "--http", "--host"]
    (tmp_path / "proj.yaml").write_text("{}")
    assert bash_complete(tmp_path, "run", "--config", "pro") == ["proj.yaml"]
    assert bash_complete(tmp_path, "completion", "") == ["bash", "zsh", "fish", "-h", "--help"]


def zsh_complete(tmp_path: Path, *line: str) -> list[str]:
    # compadd and _files belong to zsh's completion system, which needs a terminal: stand-ins print what is offered.
    (tmp_path / "script").write_text(script("zsh").replace("compdef _onetool onetool", ""))
    stubs = "compadd() { shift; print -l -- $@ }; _files() { print FILES }; compinit() {}; source ./script"
    words = " ".join(f"'{word}'" for word in ("onetool", *line))
    return run_shell("zsh", f"{stubs}; words=({words}); CURRENT={len(line) + 1}; _onetool", tmp_path)


def fish_complete(tmp_path: Path, line: str) -> list[str]:
    (tmp_path / "onetool.fish").write_text(script("fish"))
    return [row.split("\t")[0] for row in run_shell("fish", f"source ./onetool.fish; complete -C '{line}'", tmp_path)]


def test_zsh_offers_the_same(tmp_path: Path) -> None:
    def offered(*line: str) -> list[str]:
        return zsh_complete(tmp_path, *line)

    assert sorted(w for w in offered("") if not w.startswith("-")) == commands()
    assert "approve" in offered("servers", "ap") and "serve" not in offered("servers", "ap")
    assert offered("serve", "--mode", "") == ["run", "inspect"]
    assert offered("run", "--config", "") == ["FILES"]


def test_fish_offers_the_same(tmp_path: Path) -> None:
    def offered(line: str) -> list[str]:
        return fish_complete(tmp_path, line)

    assert sorted(w for w in offered("onetool ") if not w.startswith("-")) == commands()
    assert offered("onetool servers ap") == ["approve"]
    assert sorted(offered("onetool serve --mode ")) == ["inspect", "run"]


# ----- server names -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def project_and_state(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A folder whose onetool.yaml has servers gh and time, and whose store has one added at run time, extra; and a
    config of another name beside it, with the server other. Made once for the module (adding a server with no
    gateway opens the store: a heavy start), with the state folder that store is in."""
    folder = tmp_path_factory.mktemp("project")
    state = str(tmp_path_factory.mktemp("completion-state") / "state")
    config = write_config(folder, {"servers": {"gh": {"command": "gh-mcp"}, "time": {"command": TIME_SERVER}}})
    added = cli("servers", "add", "extra", "--config", str(config), "--", TIME_SERVER, env={"ONETOOL_STATE_DIR": state})
    assert added.returncode == 0, added.stderr
    (folder / "other.yaml").write_text("servers:\n  other: {command: x}\n")
    return folder, state


@pytest.fixture
def project(project_and_state: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> Path:
    """The module's project folder; this test's state folder is the one its store is in."""
    folder, state = project_and_state
    monkeypatch.setenv("ONETOOL_STATE_DIR", state)
    return folder


SERVED = ["gh", "time", "extra"]


@pytest.mark.parametrize(
    "line",
    [
        ("servers", "show", ""),
        ("servers", "enable", ""),
        ("servers", "disable", ""),
        ("servers", "restart", ""),
        ("servers", "remove", ""),
        ("servers", "tools", ""),
        ("tools", ""),
        ("auth", ""),
        ("servers", "--json", "show", ""),
    ],
    ids=" ".join,
)
def test_bash_completes_server_names(project: Path, line: tuple[str, ...]) -> None:
    assert bash_complete(project, *line) == SERVED


def test_bash_server_names_follow_the_command_line(project: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    assert bash_complete(project, "servers", "show", "t") == ["time"]
    assert bash_complete(project, "servers", "show", "--config", "other.yaml", "") == ["other"]
    assert bash_complete(project, "--config", "other.yaml", "servers", "show", "") == ["other"]
    # `--config=FILE`, which bash splits at the '=' into three words.
    assert bash_complete(project, "servers", "show", "--config", "=", "other.yaml", "") == ["other"]
    assert bash_complete(project, "servers", "show", "--config", "=", "oth") == ["other.yaml"]
    # Once the server is named, the options; a new server's name is the user's own.
    assert "time" not in bash_complete(project, "servers", "show", "gh", "") and "--json" in bash_complete(
        project, "servers", "show", "gh", ""
    )
    assert bash_complete(project, "servers", "show", "--j") == ["--json"]
    assert not set(SERVED) & set(bash_complete(project, "servers", "add", ""))
    # No config here: no names, and no error.
    assert bash_complete(tmp_path_factory.mktemp("empty"), "servers", "show", "") == []


def test_zsh_completes_server_names(project: Path) -> None:
    assert zsh_complete(project, "servers", "show", "") == SERVED
    assert zsh_complete(project, "tools", "--config", "other.yaml", "") == ["other"]
    assert "gh" not in zsh_complete(project, "servers", "show", "gh", "")


def test_fish_completes_server_names(project: Path) -> None:
    assert sorted(fish_complete(project, "onetool servers show ")) == sorted(SERVED)
    assert sorted(fish_complete(project, "onetool auth ")) == sorted(SERVED)
    assert fish_complete(project, "onetool tools --config other.yaml ") == ["other"]


def test_server_names_come_fast(project: Path) -> None:
    """What the scripts ask imports none of the gateway's heavy modules and connects nothing: reading the config
    (and the store's names) is all."""
    probe = (
        "import sys; from onetool.cli import main; main(['completion', '--servers']); "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'mcp', 'pydantic', 'anyio', 'sqlalchemy', 'httpx2', "
        "'loguru', 'sandbox.host'}), sorted({m for m in sys.modules if m.startswith(('onetool.config._', "
        "'onetool.config.reload', 'onetool.upstream', 'onetool.core.gateway'))}))"
    )
    done = subprocess.run([PYTHON, "-c", probe], capture_output=True, text=True, timeout=30, cwd=project)
    assert done.stdout == "gh\ntime\nextra\n[] []\n", done.stderr
