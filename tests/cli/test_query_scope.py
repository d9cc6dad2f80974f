"""A bulk ``--query`` stays within this deployment's task workflows.

sas puts the user's filter in parentheses and adds its task queue and task workflow types. A
filter that closes that parenthesis (``... ) OR (WorkflowId = 'x'``) selected another
deployment's task, and the Supervisor itself, before. Now it is refused, and whatever the
server lists is checked again on the client. On the real dev server."""

from __future__ import annotations

import json
from datetime import timedelta

from sas.cli.bulk_selection import check_query
from sas.cli.output import CliError
from tests.cli.test_cli import ORDER_FLAGS, sas
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack, order

INJECTION = "TaskQueue = 'other' AND ExecutionStatus = 'Running') OR (WorkflowId = 'x'"


def test_a_filter_may_not_leave_its_group() -> None:
    for bad in (INJECTION, "WorkflowId = 'a') OR (1 = 1", "(WorkflowId = 'a'", "WorkflowId = 'a"):
        try:
            check_query(bad)
        except CliError:
            continue
        raise AssertionError(f"accepted {bad!r}")
    # Parentheses inside a quoted value are the value's, and balanced groups are fine.
    assert check_query("WorkflowId = 'a)b' OR (WorkflowId = \"c(\" AND ExecutionStatus = 'Running')")
    assert check_query("WorkflowId = 'it\\'s)'")


def test_a_comment_cannot_hide_a_quote_or_parenthesis_from_the_check() -> None:
    # Temporal's parser skips comments, so `/* ' */ )` is a bare `)` to it; counted naively, the
    # quote opened in the comment hides the `)` and the filter escapes its group.
    for bad in (
        "WorkflowId = 'a' /* ' */ ) OR (WorkflowId = 'x' /* ' */",
        "WorkflowId = 'a' -- ')",
        "WorkflowId = 'a' # ')",
        "WorkflowId = 'a' */",
    ):
        try:
            check_query(bad)
        except CliError as refused:
            assert "comment" in refused.message
            continue
        raise AssertionError(f"accepted {bad!r}")
    # The same characters inside a quoted value are the value's.
    assert check_query("WorkflowId = 'a /* -- # */'")


async def test_the_injection_selects_nothing_outside_this_deployment(stack: Stack) -> None:
    mine = fresh_id("scope-mine")
    submitted = await sas(stack, "submit", *ORDER_FLAGS, "--id", mine, "--in", "1h", "--json")
    assert submitted.returncode == 0, submitted.stderr
    # Another deployment's task: same workflow type, its own queue (no worker: it stays Running).
    other_queue = fresh_id("other-deployment")
    other = fresh_id("scope-other")
    await stack.client.start_workflow(
        "OrderWorkflow", order(), id=other, task_queue=other_queue, execution_timeout=timedelta(minutes=10)
    )
    supervisor_id = stack.settings.supervisor.workflow_id
    injection = INJECTION.replace("'other'", f"'{other_queue}'").replace("'x'", f"'{supervisor_id}'")

    for flags in (("--dry-run",), ("--yes",), ("--dry-run", "--json")):
        done = await sas(stack, "compensate", "--query", injection, *flags)
        assert done.returncode == 1, done.stdout
        assert "closes a parenthesis the query did not open" in done.stderr
        assert other not in done.stdout and supervisor_id not in done.stdout

    # A query in one group lists this deployment's tasks only: neither the other one nor the Supervisor.
    async def listed() -> list[str]:
        done = await sas(stack, "compensate", "--query", "ExecutionStatus = 'Running'", "--dry-run", "--json")
        assert done.returncode == 0, done.stderr
        return [t["task_id"] for t in json.loads(done.stdout)["tasks"]]

    ids = await wait_until(listed, lambda ids: mine in ids, what="visibility to list the delayed task")
    assert other not in ids and supervisor_id not in ids
    described = await stack.client.get_workflow_handle(other).describe()
    assert described.status is not None and described.status.name == "RUNNING"
    await stack.client.get_workflow_handle(other).terminate("test over")
