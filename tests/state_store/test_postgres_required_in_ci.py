"""CI cannot stay green with the PostgreSQL tests unrun: with CI=true, a PostgreSQL test whose
server is unreachable fails; without CI it skips and says why. Shown on a real PostgreSQL test
run by pytest in a child process, pointed at a port where nothing listens (the shared server
itself is never touched)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # pytest in a subprocess

ROOT = Path(__file__).resolve().parents[2]
# A real PostgreSQL test (module-level `postgres_required`) and a `db_url` case on PostgreSQL.
TARGETS = [
    "tests/state_store/test_postgres_tls.py",
    "tests/state_store/test_mirror.py",
    "-k",
    "postgres",
]


def closed_port() -> int:
    """A port nothing listens on: bound, then released, and never listened on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_pytest(ci: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}
    env["SAS_TEST_PG_URL"] = f"postgresql+asyncpg://postgres:hunter2-not-shown@127.0.0.1:{closed_port()}/postgres"
    if ci:
        env["CI"] = "true"
    return subprocess.run(
        # -n 0: in that one process, not on parallel workers (pyproject's addopts).
        [sys.executable, "-m", "pytest", "-n", "0", "-q", "-rfEs", "-p", "no:cacheprovider", *TARGETS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_an_unreachable_postgres_fails_the_run_in_ci() -> None:
    done = run_pytest(ci=True)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-3000:]
    assert "PostgreSQL is not reachable at postgresql+asyncpg://postgres:***@127.0.0.1:" in output, output[-3000:]
    assert "CI=true: the PostgreSQL tests must run in CI" in output
    assert " skipped" not in output.splitlines()[-1], output.splitlines()[-1]
    assert "hunter2-not-shown" not in output  # the URL's password is masked


def test_an_unreachable_postgres_skips_outside_ci() -> None:
    done = run_pytest(ci=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    last = output.strip().splitlines()[-1]
    assert " skipped" in last and "failed" not in last and "error" not in last, last
    assert "PostgreSQL is not reachable at" in output
    assert "hunter2-not-shown" not in output
