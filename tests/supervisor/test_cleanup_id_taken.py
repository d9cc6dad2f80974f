"""A clean-up's start that finds its id, ``cleanup-<task>``, held by something other than sas's
clean-up of that task does not take it for the clean-up: a critical alert names what holds it,
nothing is undone, and the decision stays in the outbox until the id is free; then the
Supervisor starts the real clean-up and the task is undone.

Before, the start (``USE_EXISTING`` on a running workflow, ``REJECT_DUPLICATE`` on a closed one)
never looked at what it found: an order submitted as ``cleanup-<victim>`` was taken for the
victim's clean-up, and the victim, terminated after its charge, was never refunded."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

from sas.settings import SupervisorSettings
from sas.supervisor.act.outbox import CLEANUP_ID_TAKEN
from sas.task_models.cleanup import CleanupInput
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack, order, start_stack

# A Supervisor that finds a workflow closed from outside within a few seconds.
QUICK_ORPHANS = SupervisorSettings(
    interval_s=0.5,
    max_interval_s=1.0,
    failure_threshold=3,
    overdue_grace_s=1.5,
    cooldown_tries=0,
    orphan_after_s=1.0,
    orphan_check_s=0.5,
)


@pytest_asyncio.fixture
async def quick_stack(client: Client, temporal_address: str, services: Any, sqlite_url: str) -> AsyncIterator[Stack]:
    supervisor = QUICK_ORPHANS.model_copy(update={"workflow_id": fresh_id("supervisor")})
    async with start_stack(client, temporal_address, services.url, sqlite_url, supervisor_settings=supervisor) as s:
        yield s


async def _closed(handle: WorkflowHandle[Any, Any]) -> None:
    try:
        await asyncio.wait_for(handle.result(), timeout=60)
    except WorkflowFailureError:
        pass  # refused at once today (a reserved task id); before, it ran to its end


async def an_order(stack: Stack, victim: str) -> str:
    """The issue's scenario: an order submitted as cleanup-<victim>, ended before the victim's."""
    handle = await stack.client.start_workflow(
        "OrderWorkflow", order(), id=f"cleanup-{victim}", task_queue=stack.settings.temporal.task_queue
    )
    await _closed(handle)
    return "a workflow of type OrderWorkflow"


async def a_foreign_workflow(stack: Stack, victim: str) -> str:
    """A workflow of somebody else's, still running (nobody polls its queue): USE_EXISTING found it."""
    await stack.client.start_workflow(
        "SomebodyElsesWorkflow", {"x": 1}, id=f"cleanup-{victim}", task_queue=fresh_id("nobody-polls")
    )
    return "a workflow of type SomebodyElsesWorkflow (running"


async def a_clean_up_of_another_task(stack: Stack, victim: str) -> str:
    """sas's own workflow type, but naming another task: refused by its plan, and not the victim's."""
    other = fresh_id("other")
    forged = CleanupInput(task_id=other, task_type="order", payload={}, steps=[])
    handle = await stack.client.start_workflow(
        "CleanupWorkflow", forged, id=f"cleanup-{victim}", task_queue=stack.settings.temporal.task_queue
    )
    await _closed(handle)
    return f"a clean-up of task '{other}'"


async def _delete(client: Client, workflow_id: str) -> None:
    handle = client.get_workflow_handle(workflow_id)
    try:
        await handle.terminate("it holds a clean-up's id")
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise  # a closed one cannot be terminated: Temporal says it is not found running
    await client.workflow_service.delete_workflow_execution(
        DeleteWorkflowExecutionRequest(
            namespace=client.namespace, workflow_execution=WorkflowExecution(workflow_id=workflow_id)
        )
    )


@pytest.mark.parametrize("impostor", [an_order, a_foreign_workflow, a_clean_up_of_another_task])
async def test_a_clean_up_id_held_by_another_workflow_is_alerted_not_taken_for_the_clean_up(
    quick_stack: Stack, impostor: Callable[[Stack, str], Awaitable[str]]
) -> None:
    stack = quick_stack
    victim = fresh_id("victim")
    held_by = await impostor(stack, victim)

    # The victim is charged, then terminated from outside while it ships.
    await stack.add_fault(endpoint="shipping.ship", kind="hang", hang_s=30, match_order_id=victim)
    handle = await stack.submit(victim)
    await wait_until(lambda: stack.step_states(victim), lambda s: s.get("ship") == "Processing", what="ship in flight")
    await handle.terminate("closed from outside, after its charge")

    async def taken() -> list[Any]:
        return [a for a in await stack.alerts(victim) if a.kind == CLEANUP_ID_TAKEN]

    [alert] = await wait_until(taken, timeout=60, what="the clean-up id alert")
    assert alert.severity == "critical" and alert.status == "open"
    assert held_by in alert.message and "nothing of" in alert.message, alert.message
    assert "temporal workflow delete" in alert.suggested_action
    # Not taken for the clean-up: nothing refunded, and the decision is still to be sent.
    effects = [(e["service"], e["action"]) for e in await stack.ledger(victim)]
    assert ("payment", "charge") in effects and ("payment", "refund") not in effects, effects
    [decision] = [d for d in await stack.decisions(victim) if d.kind == "cleanup"]
    assert decision.signal_sent_at is None

    # Once the id is free, the next sweep starts the real clean-up and the victim is undone.
    await _delete(stack.client, f"cleanup-{victim}")
    await wait_until(lambda: stack.task_state(victim), lambda s: s == "Compensated", timeout=90, what="undone")
    effects = [(e["service"], e["action"]) for e in await stack.ledger(victim)]
    assert ("payment", "refund") in effects, effects
    [alert] = await taken()
    assert alert.status == "resolved"
