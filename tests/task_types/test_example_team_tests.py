"""The examples' own tests, as a team's repository runs them: each ``examples/<team>/tests`` copied
into a fresh directory with none of sas's test setup and run with ``python -m pytest``; the
payout's are fast tests of its child step and of one refused payee (``sas.api.testing``)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TEAMS = sorted(p.parent.name for p in EXAMPLES.glob("*/tests"))


def test_the_payout_team_has_tests_of_its_own() -> None:
    assert "payout" in TEAMS


@pytest.mark.timeout(600)
@pytest.mark.parametrize("team", TEAMS)
def test_a_team_s_own_tests_pass_in_a_repository_of_its_own(team: str, tmp_path: Path) -> None:
    shutil.copytree(EXAMPLES / team / "tests", tmp_path / "tests")
    env = {"PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin", "HOME": str(tmp_path)}
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=560,
    )
    out = ran.stdout + ran.stderr
    assert ran.returncode == 0, out[-4000:]
    assert re.search(r"\b\d+ passed\b", out) and "failed" not in out, out[-4000:]
