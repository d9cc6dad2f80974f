"""What an operator reads fits an 80-column terminal: the read commands on real tasks (one
completed, one compensated with its error, one parked with an alert) and every command's help."""

from __future__ import annotations

import os
import subprocess
import sys

from sas.task_models import OperatorRequest, TaskState, TaskStatus
from tests.cli.test_cli import sas
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack, order

WIDTH = 80
DECLINED = "4000000000000002"


def too_wide(text: str) -> list[str]:
    return [line for line in text.splitlines() if len(line.rstrip()) > WIDTH]


async def sas80(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    done = await sas(stack, *args, columns=WIDTH)
    assert done.returncode == 0, (args, done.stderr)
    return done


async def test_the_read_commands_fit_80_columns(stack_no_supervisor: Stack) -> None:
    stack = stack_no_supervisor
    done_id, undone_id, parked_id = fresh_id("w80-done"), fresh_id("w80-undone"), fresh_id("w80-parked")
    await (await stack.submit(done_id)).result()
    undone = await stack.submit(undone_id, order(card=DECLINED))
    await wait_until(
        lambda: undone.query("status", result_type=TaskStatus),
        lambda s: s.state == TaskState.FAILED,
        what="the declined charge to wait for a decision",
    )
    await undone.signal("compensate", OperatorRequest(by="test", reason="card declined"))
    await undone.result()
    await stack.add_fault(endpoint="payment.charge", kind="transient", match_order_id=parked_id)
    parked = await stack.submit(parked_id)
    await wait_until(
        lambda: parked.query("status", result_type=TaskStatus),
        lambda s: s.state == TaskState.FAILED,
        what="the charge to wait for a decision",
    )
    await parked.signal(
        "park", OperatorRequest(step="charge", failure_count=1, by="supervisor", reason="a long reason " * 8)
    )
    await wait_until(lambda: stack.task_state(parked_id), lambda s: s == "Error", what="parked")

    outputs = {}
    for args in (
        ("list",),
        ("alerts",),
        ("reconcile", "--dry-run"),
        *(("status", t) for t in (done_id, undone_id, parked_id)),
        *(("show", t) for t in (done_id, undone_id, parked_id)),
        ("retry", "--state", "error", "--dry-run"),
    ):
        outputs[args] = (await sas80(stack, *args)).stdout
    assert undone_id in outputs[("list",)] and parked_id in outputs[("show", parked_id)]
    wide = {" ".join(args): too_wide(text) for args, text in outputs.items() if too_wide(text)}
    assert wide == {}


def test_every_commands_help_fits_80_columns() -> None:
    env = {**os.environ, "COLUMNS": str(WIDTH)}

    def run(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "sas.cli.main", *args, "--help"], capture_output=True, text=True, env=env, timeout=60
        )
        assert done.returncode == 0, (args, done.stderr)
        return done.stdout

    top = run()
    # A command's row starts with its name; wrapped description lines start with spaces.
    commands = [line.split()[1] for line in top.splitlines() if line.startswith("│ ") and line[2] != " "]
    assert "submit" in commands and "alerts" in commands
    wide = {name: too_wide(run(name)) for name in commands}
    assert {name: lines for name, lines in wide.items() if lines} == {}
    assert too_wide(top) == []
