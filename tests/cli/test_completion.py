"""`onetool completion bash|zsh|fish`: each script is valid for its shell and, run by that shell, completes what
the parser has: commands, `servers` actions, options, an option's choices, files after --config."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from onetool.cli import build_parser
from tests.admin_api import cli


def script(shell: str) -> str:
    done = cli("completion", shell)
    assert done.returncode == 0, done.stderr
    return done.stdout


def run_shell(shell: str, code: str, cwd: Path) -> list[str]:
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed (.ci/run installs it)")
    done = subprocess.run([shell, "-c", code], capture_output=True, text=True, timeout=30, cwd=cwd)
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
        f"source ./script; COMP_WORDS=({words}); COMP_CWORD={len(line)}; _onetool; printf '%s\\n' \"${{COMPREPLY[@]}}\""
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


def test_zsh_offers_the_same(tmp_path: Path) -> None:
    # compadd and _files belong to zsh's completion system, which needs a terminal: stand-ins print what is offered.
    (tmp_path / "script").write_text(script("zsh").replace("compdef _onetool onetool", ""))
    stubs = "compadd() { shift; print -l -- $@ }; _files() { print FILES }; compinit() {}; source ./script"

    def offered(*line: str) -> list[str]:
        words = " ".join(f"'{word}'" for word in ("onetool", *line))
        return run_shell("zsh", f"{stubs}; words=({words}); CURRENT={len(line) + 1}; _onetool", tmp_path)

    assert sorted(w for w in offered("") if not w.startswith("-")) == commands()
    assert "approve" in offered("servers", "ap") and "serve" not in offered("servers", "ap")
    assert offered("serve", "--mode", "") == ["run", "inspect"]
    assert offered("run", "--config", "") == ["FILES"]


def test_fish_offers_the_same(tmp_path: Path) -> None:
    (tmp_path / "onetool.fish").write_text(script("fish"))

    def offered(line: str) -> list[str]:
        return [
            row.split("\t")[0] for row in run_shell("fish", f"source ./onetool.fish; complete -C '{line}'", tmp_path)
        ]

    assert sorted(w for w in offered("onetool ") if not w.startswith("-")) == commands()
    assert offered("onetool servers ap") == ["approve"]
    assert sorted(offered("onetool serve --mode ")) == ["inspect", "run"]
