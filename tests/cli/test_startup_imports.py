"""``sas --help``, ``sas COMMAND --help`` and ``sas --version`` start at once: they import none of
the heavy packages (Temporal's client, SQLAlchemy, alembic, httpx, the settings and models), and
a command imports its own module, not the other commands'. The commands that only read the state
store (``sas show``, ``list``, ``alerts``, ``incidents``) import neither Temporal's SDK nor the task
types. What is imported is checked, not how long it takes (``bench/startup.py`` and
``bench/show_latency.py`` time it)."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from sas.cli.commands import COMMAND_MODULES
from tests.helpers import fresh_id

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


def imported_by(*args: str, succeeds: bool = True, **env: str) -> set[str]:
    """Every module the ``sas`` entry point imports for ``args``, from ``python -X importtime``."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "from sas.cli.main import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "80", **env},
    )
    assert (done.returncode == 0) == succeeds, done.stderr[-2000:]
    return {m[1] for m in re.finditer(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", done.stderr, re.M)}


def heavy(modules: set[str], packages: tuple[str, ...] = HEAVY) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in packages))


def test_the_check_sees_what_a_command_imports() -> None:
    # The control: a command that runs (not --help) loads what it needs, and the check sees it.
    modules = imported_by("schedule", "create", "x", "--every", "1d", succeeds=False)  # no --type given
    assert "typer" in modules and "sas.cli.main" in modules
    assert "sas.task_models" in modules


@pytest.mark.parametrize("args", [("--help",), ("submit", "--help"), ("--version",)])
def test_help_and_version_import_nothing_heavy(args: tuple[str, ...]) -> None:
    assert heavy(imported_by(*args)) == []


def test_each_commands_help_imports_nothing_heavy_nor_another_command() -> None:
    top = subprocess.run(
        [sys.executable, "-m", "sas.cli.main", "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    commands = re.findall(r"^  (\S+)\s{2,}", top.split("Commands:", 1)[1], re.M)
    assert {"submit", "status", "retry", "park", "alerts", "services", "schedule"} <= set(commands)
    imported = {name: imported_by(name, "--help") for name in commands}
    assert {name: heavy(found) for name, found in imported.items() if heavy(found)} == {}
    # Each command's module alone: `sas show` builds neither `sas submit` nor its imports.
    own = {name: {f"sas.cli.{COMMAND_MODULES[name]}"} if name in COMMAND_MODULES else set() for name in commands}
    assert {name: command_modules(found) for name, found in imported.items()} == own


def command_modules(modules: set[str]) -> set[str]:
    return {m for m in modules if m.startswith("sas.cli.") and m.endswith("_cmd")}


def test_help_imports_every_command_to_list_it() -> None:
    assert command_modules(imported_by("--help")) == {f"sas.cli.{m}" for m in COMMAND_MODULES.values()}


# What only `sas submit`, `sas types` and the commands that ask Temporal need.
TEMPORAL_OR_TYPES = ("temporalio", "sas.task_types", "sas.workflows", "sas.activities")


def test_read_commands_import_neither_temporal_nor_the_task_types(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'state.db'}"
    task_id = fresh_id("read")
    asyncio.run(one_task(url, task_id))
    for args in (("show", task_id), ("show", task_id, "--json"), ("list",), ("alerts",), ("incidents",)):
        modules = imported_by(*args, SAS_DATABASE__URL=url)
        assert "sas.state_store.engine" in modules, args  # the control: it opened the state store
        assert heavy(modules, TEMPORAL_OR_TYPES) == [], args


async def one_task(url: str, task_id: str) -> None:
    """A migrated state store holding one accepted task (`sas show` of an unknown id asks Temporal)."""
    from sas import state_store
    from sas.settings import DatabaseSettings
    from sas.state_store.agent_writes import make_step_writer
    from sas.task_models import StepPlan, StepPolicyValues, TaskAccepted

    await state_store.upgrade_async(url)
    writer = make_step_writer(DatabaseSettings(url=url))
    try:
        step = StepPlan(
            name="pay", position=0, agent="payroll.pay", idempotency_key=f"{task_id}:pay", policy=StepPolicyValues()
        )
        accepted = TaskAccepted(
            chain_id="chain",
            run_id="chain",
            task_id=task_id,
            task_type="payroll_batch",
            workflow_type="PayrollBatchWorkflow",
            task_queue="sas-tasks",
            payload={},
            accepted_at=datetime.now(UTC),
            steps=[step],
        )
        assert (await writer.accept(accepted)).status == "new"
    finally:
        await writer.aclose()
