"""What users typed is printed as they typed it: an id, an operator's name or reason that looks
like rich markup (``[link=http://x]evil[/link]``) is shown literally by ``sas status`` and
``sas show``, never turned into a link or a style that changes what the operator sees."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

from tests import cli_process
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack

EVIL = "[link=http://x]evil[/link]"
ACTOR = "[bold red]mallory[/bold red]"


async def sas(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "SAS_TEMPORAL__ADDRESS": stack.settings.temporal.address,
        "SAS_TEMPORAL__TASK_QUEUE": stack.settings.temporal.task_queue,
        "SAS_DATABASE__URL": stack.settings.database.url,
        "COLUMNS": "400",  # wide enough that no table cell is folded
    }
    argv = [sys.executable, "-m", "sas.cli.main", *args]
    return await asyncio.to_thread(cli_process.run, argv, capture_output=True, text=True, env=env, timeout=120)


async def test_markup_in_an_id_is_printed_literally(stack: Stack) -> None:
    for command in ("status", "show"):
        done = await sas(stack, command, EVIL)
        assert done.returncode == 1
        assert f"invalid task id '{EVIL}'" in done.stderr, done.stderr


async def test_markup_in_what_an_operator_typed_is_printed_literally(stack_no_supervisor: Stack) -> None:
    stack = stack_no_supervisor
    task_id = fresh_id("markup")
    # A permanent refusal: the task waits for a decision (there is no Supervisor here).
    await stack.add_fault(
        endpoint="shipping.ship", kind="permanent", status=422, error="rejected", match_order_id=task_id
    )
    await stack.submit(task_id)
    await wait_until(lambda: stack.step_states(task_id), lambda s: s.get("ship") == "Failed", what="ship to fail")
    done = await sas(stack, "compensate", task_id, "--by", ACTOR, "--reason", EVIL)
    assert done.returncode == 0, done.stderr
    await wait_until(lambda: stack.task_state(task_id), lambda s: s == "Compensated", what="the undo to finish")

    status = await sas(stack, "status", task_id)
    assert status.returncode == 0, status.stderr
    assert f"compensate requested by {ACTOR}: {EVIL}" in status.stdout, status.stdout

    shown = await sas(stack, "show", task_id)
    assert shown.returncode == 0, shown.stderr
    assert EVIL in shown.stdout and ACTOR in shown.stdout, shown.stdout
