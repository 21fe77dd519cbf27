"""Without a clone: the wheel `make wheel` builds installs with pipx (offline here, from the wheels `make test`
gathered) and works from a clean HOME; and the README's quick start works as written, from a clean HOME too."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WHEELHOUSE = ROOT / ".wheels"
PIPX = ROOT / ".venv" / "bin" / "pipx"


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """A new user's environment: a HOME of its own, a plain PATH, nothing of OneTool's."""
    return {"HOME": str(home), "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", **extra}


def test_the_built_wheel_installs_with_pipx_and_runs(tmp_path: Path) -> None:
    if not (WHEELHOUSE / ".built").exists():
        pytest.skip("no wheelhouse: `make test` gathers it (.wheels)")
    built = subprocess.run(
        ["make", "-s", "wheel", f"DIST={tmp_path / 'dist'}"], cwd=ROOT, capture_output=True, text=True
    )
    assert built.returncode == 0, built.stderr
    [wheel] = (tmp_path / "dist").glob("onetool-*-py3-none-any.whl")
    home, bin_dir = tmp_path / "home", tmp_path / "bin"
    offline = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(WHEELHOUSE)}  # tests talk to no index
    env = clean_env(home, PIPX_HOME=str(tmp_path / "pipx"), PIPX_BIN_DIR=str(bin_dir), **offline)
    installed = subprocess.run([str(PIPX), "install", str(wheel)], env=env, capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    onetool = str(bin_dir / "onetool")
    project = tmp_path / "project"
    project.mkdir()

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([onetool, *args], env=clean_env(home), cwd=project, capture_output=True, text=True)

    assert run("--version").stdout.startswith("onetool ")
    # The sandbox runs from the installed package: its worker, its policy, its seccomp filter.
    ran = run("run", "-c", "sum(range(10))")
    assert (ran.returncode, ran.stdout) == (0, "45\n"), ran.stderr
    assert "complete -F _onetool onetool" in run("completion", "bash").stdout


def quick_start() -> list[str]:
    """The commands of the README's "Try it from a shell" block."""
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"Try it from a shell[^\n]*\n+```sh\n(.*?)```", readme, re.S)
    assert block is not None, "the README's quick start block moved"
    return [line for line in block.group(1).splitlines() if line.strip()]


@pytest.mark.parametrize("command", quick_start())
def test_the_readme_quick_start_works_from_a_clean_home(tmp_path: Path, command: str) -> None:
    words = shlex.split(command)
    done = subprocess.run(words, cwd=ROOT, env=clean_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), "it printed nothing"
    assert not (tmp_path / ".local" / "state" / "onetool" / "onetool.db").exists(), "no store shared by projects"
    assert os.listdir(tmp_path), "it kept its state under the new HOME"
