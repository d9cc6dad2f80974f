"""``sas --help``, ``sas COMMAND --help`` and ``sas --version`` start at once: they import none of
the heavy packages (Temporal's client, SQLAlchemy, alembic, httpx, the settings and models).
What is imported is checked, not how long it takes (``bench/startup.py`` times it)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # every command's help, each a fresh interpreter

# Top-level packages (and sas's own heavy parts) that only the commands that use them may load.
HEAVY = (
    "alembic",
    "sqlalchemy",
    "temporalio",
    "httpx",
    "httpcore",
    "uvicorn",
    "starlette",
    "pydantic",
    "pydantic_settings",
    "asyncpg",
    "aiosqlite",
    "cryptography",
    "asyncio",
    "sas.settings",
    "sas.state_store",
    "sas.task_models",
    "sas.workflows",
    "sas.activities",
    "sas.supervisor",
    "sas.worker",
    "sas.payload_codec",
)


def imported_by(*args: str, succeeds: bool = True) -> set[str]:
    """Every module the ``sas`` entry point imports for ``args``, from ``python -X importtime``."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "from sas.cli.main import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert (done.returncode == 0) == succeeds, done.stderr[-2000:]
    return {m[1] for m in re.finditer(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", done.stderr, re.M)}


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_the_check_sees_what_a_command_imports() -> None:
    # The control: a command that runs (not --help) loads what it needs, and the check sees it.
    modules = imported_by("schedule", "create", "x", "--every", "1d", succeeds=False)  # no --type given
    assert "typer" in modules and "sas.cli.main" in modules
    assert "sas.task_models" in modules


@pytest.mark.parametrize("args", [("--help",), ("submit", "--help"), ("--version",)])
def test_help_and_version_import_nothing_heavy(args: tuple[str, ...]) -> None:
    assert heavy(imported_by(*args)) == []


def test_no_commands_help_imports_anything_heavy() -> None:
    top = subprocess.run(
        [sys.executable, "-m", "sas.cli.main", "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    commands = re.findall(r"^  (\S+)\s{2,}", top.split("Commands:", 1)[1], re.M)
    assert {"submit", "status", "retry", "park", "alerts", "services", "schedule"} <= set(commands)
    loaded = {name: heavy(imported_by(name, "--help")) for name in commands}
    assert {name: found for name, found in loaded.items() if found} == {}
