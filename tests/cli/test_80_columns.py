"""What an operator reads fits an 80-column terminal, and no word or id is split over two lines
(a cell too narrow for a word ends it with an ellipsis instead): every read command on real
tasks with long ids in every state (Processed, Compensated with a Skipped step, Failed, Error
with a Waiting step, Pending, Stuck), the demo's summary, the submit hint (its command on one
line) and every command's help."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sas.state_store import mirror
from sas.state_store.alerts import raise_alert
from sas.state_store.tables import Alert
from sas.task_models import OperatorRequest, StepState, StepTransition, TaskState, TaskStatus
from tests import cli_process
from tests.cli.test_cli import ORDER_FLAGS, sas
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack, order

pytestmark = pytest.mark.slow  # every command's help and output, each a subprocess

WIDTH = 80
DECLINED = "4000000000000002"
# Task ids as long as people make them: a prefix, a purpose, a random part.
LONG = "w80-customer-order-for-the-spring-campaign"
STATES = {s.value for s in TaskState} | {s.value for s in StepState} | {"Stuck"}
HEADER_WORDS = {"FailureCount", "CompleteBy", "LockedBy,", "incarnations"}


def too_wide(text: str) -> list[str]:
    return [line for line in text.splitlines() if len(line.rstrip()) > WIDTH]


def _cells(line: str) -> list[str] | None:
    if not re.search("[│┃]", line):
        return None
    return [c.strip() for c in re.split("[│┃]", line)[1:-1]]


def split_words(text: str, tokens: set[str]) -> list[str]:
    """Tokens (ids, states, header words) broken over lines: in one table column over rows that
    follow each other, or over lines of prose. A token is broken when it is found in the text of
    a few such lines put together, but in none of them alone."""
    runs: list[list[str]] = []  # each: one column's cells (or the prose) on consecutive lines
    current: list[list[str]] = []
    for line in text.splitlines():
        cells = _cells(line)
        parts = cells if cells is not None else [line.strip()]
        if current and len(current) == len(parts):
            for run, part in zip(current, parts, strict=True):
                run.append(part)
        else:
            runs.extend(current)
            current = [[part] for part in parts]
    runs.extend(current)
    broken = set()
    for run in runs:
        for start in range(len(run)):
            joined = run[start]
            for end in range(start + 1, min(start + 4, len(run))):
                before, joined = joined, joined + run[end]
                broken |= {t for t in tokens if t in joined and t not in before and t not in run[end]}
    return sorted(broken)


async def sas80(stack: Stack, *args: str) -> str:
    done = await sas(stack, *args, columns=WIDTH)
    assert done.returncode == 0, (args, done.stderr)
    return done.stdout


async def _failed(stack: Stack, task_id: str) -> None:
    handle = stack.client.get_workflow_handle(task_id)
    await wait_until(
        lambda: handle.query("status", result_type=TaskStatus),
        lambda s: s.state == TaskState.FAILED,
        what=f"{task_id} to wait for a decision",
    )


async def test_the_read_commands_fit_80_columns_without_splitting_a_word(stack_no_supervisor: Stack) -> None:
    stack = stack_no_supervisor
    done_id, undone_id = fresh_id(f"{LONG}-done"), fresh_id(f"{LONG}-undone")
    parked_id, failed_id = fresh_id(f"{LONG}-parked"), fresh_id(f"{LONG}-failed")
    submitted = await sas(stack, "submit", *ORDER_FLAGS, "--id", done_id, "--wait", columns=WIDTH)
    assert submitted.returncode == 0, submitted.stderr
    hint = submitted.stdout
    # The command it suggests is on a line of its own, whole, however long the id.
    assert f"  sas status {done_id} --follow" in hint.splitlines()

    undone = await stack.submit(undone_id, order(card=DECLINED))
    await _failed(stack, undone_id)
    await undone.signal("compensate", OperatorRequest(by="test", reason="card declined"))
    await undone.result()
    for task_id in (parked_id, failed_id):
        await stack.add_fault(endpoint="payment.charge", kind="transient", match_order_id=task_id)
        await stack.submit(task_id)
        await _failed(stack, task_id)
    await stack.client.get_workflow_handle(parked_id).signal(
        "park", OperatorRequest(step="charge", by="operator", reason="a long reason for parking " * 6)
    )
    await wait_until(lambda: stack.task_state(parked_id), lambda s: s == "Error", what="parked")
    record = await stack.record(parked_id)
    assert record is not None
    async with stack.sessions() as session:
        # A Waiting step (an approval with a deadline) in the mirror, as a wait step writes it.
        await mirror.record_transitions(
            session,
            [
                StepTransition(
                    task_id=parked_id,
                    step="ship",
                    version=2**62,
                    state=StepState.WAITING,
                    at=datetime.now(UTC),
                    chain_id=record.task.chain_id,
                    note="an approval by the warehouse until 2030-01-01T00:00:00Z",
                )
            ],
        )
    now = datetime.now(UTC)
    async with stack.sessions() as session, session.begin():
        await raise_alert(
            session,
            Alert(
                incident_key=fresh_id("incident"),
                severity="critical",
                kind="parked",
                task_id=parked_id,
                step="charge",
                failure_count=3,
                message="CompensationFailed: RemoteTransient: /payment/refund answered 503 " * 2,
                suggested_action=f"sas retry {parked_id} once the payment service answers again",
                status="open",
                created_at=now - timedelta(minutes=3),
                updated_at=now,
            ),
        )

    ids = {done_id, undone_id, parked_id, failed_id}
    outputs = {}
    for args in (
        ("list",),
        ("list", "--state", "error"),
        ("alerts",),
        ("alerts", "--status", "all"),
        ("services",),
        ("schedule", "list"),
        ("reconcile", "--dry-run"),
        *(("status", t) for t in ids),
        *(("show", t) for t in ids),
        ("retry", "--state", "error", "--dry-run"),
        ("compensate", "--state", "failed", "--dry-run"),
        ("resubmit", "--state", "error", "--dry-run"),
    ):
        outputs[" ".join(args)] = await sas80(stack, *args)
    outputs["submit"] = hint

    shown = outputs[f"show {parked_id}"] + outputs[f"show {undone_id}"]
    assert "Waiting" in shown and "Skipped" in shown and "Error" in shown and "Compensated" in shown
    assert "approval" in shown and "warehouse" in shown  # a Waiting step's note
    # Ids longer than their column are cut in the middle: the start and the end, where they differ, stay.
    for task_id in ids:
        assert task_id[:6] in outputs["list"] and task_id[-12:] in outputs["list"], task_id
    assert parked_id[-12:] in outputs["alerts"]
    tokens = ids | STATES | HEADER_WORDS
    # The hint's command is one line, however long (a terminal may fold it; it copies whole).
    wide = {
        name: [x for x in too_wide(text) if x.strip() != f"sas status {done_id} --follow"]
        for name, text in outputs.items()
    }
    assert {name: lines for name, lines in wide.items() if lines} == {}
    assert {name: split_words(text, tokens) for name, text in outputs.items() if split_words(text, tokens)} == {}


def test_the_demo_summary_fits_80_columns() -> None:
    names = ["clean", "flaky-payment", "card-declined", "shipping-hangs", "terminated", "refund-down"]
    states = ["Processed", "Processed", "Compensated", "Compensated", "Compensated", "Error", "Processing"]
    results: list[dict[str, Any]] = [
        {
            "task_id": f"demo-125959-{i:03d}-{names[i % len(names)]}",
            "case": names[i % len(names)],
            "state": state,
            "expected": "Processed",
            "problems": ["expected Processed", "completed but no ship in the ledger"] if state == "Processing" else [],
            "what": "",
            "notes": "cool-down, 1 Supervisor retry, terminated; cleaned up by the Supervisor" if i % 2 else "",
        }
        for i, state in enumerate(states)
    ]
    script = f"from sas.cli.up_demo_cmd import _summary; _summary({results!r}, 'orders')"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "80"}
    )
    assert done.returncode == 0, done.stderr
    ids = {str(r["task_id"]) for r in results}
    assert all(i in done.stdout for i in ids)  # whole, each on a line
    assert too_wide(done.stdout) == []
    assert split_words(done.stdout, ids | STATES) == []


def test_the_splitting_check_finds_a_split() -> None:
    # The check itself: rich's default folding splits a state over two lines, and it is caught.
    from rich.console import Console
    from rich.table import Table

    table = Table("step")
    table.add_column("state", overflow="fold")  # as sas's tables were made before
    table.add_row("charge", "CompensationFailed")
    console = Console(width=20, file=open(os.devnull, "w"))  # noqa: SIM115
    with console.capture() as captured:
        console.print(table)
    assert "CompensationFailed" in split_words(captured.get(), STATES)


def test_every_commands_help_fits_80_columns() -> None:
    env = {**os.environ, "COLUMNS": str(WIDTH)}

    def run(*args: str) -> str:
        done = cli_process.run(
            [sys.executable, "-m", "sas.cli.main", *args, "--help"], capture_output=True, text=True, env=env, timeout=60
        )
        assert done.returncode == 0, (args, done.stderr)
        return done.stdout

    top = run()
    commands = re.findall(r"^  (\S+)\s{2,}", top.split("Commands:", 1)[1], re.M)
    assert "submit" in commands and "alerts" in commands
    helps = {name: run(name) for name in commands}
    assert {name: too_wide(text) for name, text in helps.items() if too_wide(text)} == {}
    assert too_wide(top) == []
    # Help wraps between words, never inside one (a hyphenated word is not cut at its hyphen).
    for name, text in helps.items():
        assert not re.search(r"\w-\n", text), name
