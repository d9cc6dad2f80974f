"""A newcomer's first week with ``sas``, as a new user meets it:
in an empty folder, on a fresh state store, with typos in flags and files."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import stat
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.common import WorkflowIDReusePolicy

from tests import cli_process
from tests.cli.test_cli import sas
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack, order

pytestmark = pytest.mark.slow  # sas commands in subprocesses, against a stack

READ_COMMANDS = [
    ("list",),
    ("status", "order-1"),
    ("show", "order-1"),
    ("alerts",),
    ("services",),
    ("reconcile", "--dry-run"),
    ("retry", "--state", "error", "--dry-run"),
    ("compensate", "--query", "ExecutionStatus = 'Running'", "--dry-run"),
]


def run_sas(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``sas`` as a new user runs it: in ``cwd``, with no SAS_* settings but ``env``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SAS_")}
    clean.update(env, COLUMNS="80")
    # Temporal is not up: a command that asked it first would fail with another line.
    clean.setdefault("SAS_TEMPORAL__ADDRESS", "127.0.0.1:1")
    return cli_process.run(
        [sys.executable, "-c", "from sas.cli.main import main; main()", *args],
        cwd=cwd,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("args", READ_COMMANDS, ids=lambda a: " ".join(a))
def test_a_read_command_in_an_empty_folder_creates_nothing(tmp_path: Path, args: tuple[str, ...]) -> None:
    done = run_sas(tmp_path, *args)
    assert done.returncode == 1, done.stdout
    assert done.stderr.splitlines() == [
        "sas: no sas state store at .sas/state.db: start one here with `sas up`, or point at one"
        " (`. .sas/env` where `sas up` runs, or SAS_DATABASE__URL)"
    ]
    assert list(tmp_path.iterdir()) == []


def test_a_url_to_a_missing_directory_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "state.db"
    done = run_sas(tmp_path, "list", SAS_DATABASE__URL=f"sqlite+aiosqlite:///{missing}")
    assert done.returncode == 1 and f"no sas state store at {missing}" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_migrate_creates_a_private_store_and_refuses_a_foreign_one(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'data' / 'state.db'}"
    done = run_sas(tmp_path, "migrate", SAS_DATABASE__URL=url)
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE((tmp_path / "data").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "data" / "state.db").stat().st_mode) == 0o600

    # Now it is a state store: the read commands answer, with nothing to say.
    alerts = run_sas(tmp_path, "alerts", SAS_DATABASE__URL=url)
    assert (alerts.returncode, alerts.stdout) == (0, "no open alerts\n"), alerts.stderr
    empty = run_sas(tmp_path, "retry", "--state", "error", "--dry-run", SAS_DATABASE__URL=url)
    assert empty.returncode == 0, empty.stderr
    assert empty.stdout == "no task matches --state Error: nothing to retry\n"
    assert "--dry-run" not in empty.stderr

    # Another application's alembic_version, at an id sas also uses: refused, never "up to date".
    for name, revision in (("other.db", "0007"), ("other2.db", "e1f2a3b4c5d6")):
        foreign = tmp_path / name
        with sqlite3.connect(foreign) as db:
            db.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
            db.execute("INSERT INTO alembic_version VALUES (?)", (revision,))
        refused = run_sas(tmp_path, "migrate", SAS_DATABASE__URL=f"sqlite+aiosqlite:///{foreign}")
        assert refused.returncode == 2 and len(refused.stderr.splitlines()) == 1, refused.stderr
        assert "another application's alembic_version table" in refused.stderr
        with sqlite3.connect(foreign) as db:
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert tables == {"alembic_version"}  # nothing of sas's was added


def test_version_and_flags_in_help(tmp_path: Path) -> None:
    done = run_sas(tmp_path, "--version")
    assert (done.returncode, done.stdout) == (0, f"sas {version('sas')}\n")
    for command in ("retry", "submit", "status", "demo"):
        shown = run_sas(tmp_path, command, "--help").stdout
        assert "<bool>" not in shown and "--help " in shown, command


def test_validation_errors_name_the_field_and_say_what_is_allowed(tmp_path: Path) -> None:
    order = ["--type", "order", "--set", "customer_id=c1", "--set", "sku=BAD SKU!", "--set", "quantity=0"]
    done = run_sas(tmp_path, "submit", *order, "--set", "amount_cents=100")
    assert done.returncode == 1
    errors = done.stderr
    assert "--set sku: must be letters, digits, '.', '_' and '-' only" in errors
    assert "--set quantity: Input should be greater than 0" in errors
    assert "'address': required" in errors
    assert "customer_id" not in errors and "amount_cents" not in errors
    assert not re.search(r"\^\[|\\x[0-9a-f]{2}|\]\+\$", errors), errors  # no raw regex

    order_file = tmp_path / "order.json"
    order_file.write_text(json.dumps({"sku": "B-1", "quantity": 1, "amount_cents": 5, "currency": "euro"}))
    given = ["--set", "customer_id=c1\x7f", "--set", "address=1 Main St"]
    done = run_sas(tmp_path, "submit", "--type", "order", str(order_file), *given)
    assert done.returncode == 1
    assert f"'currency' in {order_file}: must be a three-letter currency code" in done.stderr
    assert "--set customer_id: must be printable ASCII only" in done.stderr

    done = run_sas(tmp_path, "submit", "--id", "bad id", "--type", "order")
    assert "--id: invalid task id 'bad id'" in done.stderr
    done = run_sas(tmp_path, "submit", "--type", "parcel")
    assert done.stderr.startswith("sas: --type 'parcel': unknown task type")


async def test_an_undone_order_says_where_it_failed(stack: Stack) -> None:
    task_id = fresh_id("declined")
    handle = await stack.submit(task_id, order(card="4000000000000002"))
    await handle.result()
    await wait_until(lambda: stack.task_state(task_id), lambda s: s == "Compensated", what="compensated")
    for command in ("show", "status"):
        done = await sas(stack, command, task_id)
        assert done.returncode == 0, done.stderr
        first = done.stdout.splitlines()[0]
        assert "Compensated, at step charge" in first, first


async def test_status_shows_the_task_not_a_refused_reuse_of_its_id(stack: Stack) -> None:
    task_id = fresh_id("reused")
    await (await stack.submit(task_id)).result()
    # Someone starts the id again from outside sas: the run is refused (TaskIdReused) and ends.
    reuse = await stack.client.start_workflow(
        "OrderWorkflow",
        order(),
        id=task_id,
        task_queue=stack.settings.temporal.task_queue,
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
    )
    with pytest.raises(WorkflowFailureError):
        await reuse.result()
    done = await sas(stack, "status", task_id, "--json")
    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout)
    assert status["state"] == "Processed", status
    assert [s["state"] for s in status["steps"]] == ["Processed"] * 3


def test_elsewhere_than_linux_and_macos_one_line_says_so(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from sas.cli.main import main; sys.platform = 'win32'; main()", "list"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "sas: sas runs on Linux and macOS, not on win32",
        "  use WSL or the Docker image (see the README's quick start)",
    ]
    assert list(tmp_path.iterdir()) == []
