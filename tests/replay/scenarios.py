"""The runs whose histories are kept in tests/histories/: one per path through each workflow type.

Recording them again (``SAS_RECORD_HISTORIES=1 python -m pytest tests/replay -k record``) is
needed only when a change is *meant* to alter histories - behind ``workflow.patched``
(see docs/replay.md)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from sas.task_models import OperatorAnswer, OperatorRequest, TaskState, TaskStatus
from tests.helpers import wait_until
from tests.stack import Stack, order


async def happy_order(stack: Stack, task_id: str) -> None:
    await (await stack.submit(task_id)).result()


async def compensated_order(stack: Stack, task_id: str) -> None:
    await stack.add_fault(
        endpoint="shipping.ship", kind="permanent", status=422, error="address_rejected", match_order_id=task_id
    )
    await (await stack.submit(task_id)).result()


async def supervisor_retry_order(stack: Stack, task_id: str) -> None:
    # Two 503s use up the Agent's quick attempts; the Supervisor's retry then succeeds.
    await stack.add_fault(endpoint="shipping.ship", kind="transient", times=2, match_order_id=task_id)
    await (await stack.submit(task_id)).result()


async def parked_then_operator_retry(stack: Stack, task_id: str) -> None:
    await stack.add_fault(endpoint="shipping.ship", kind="permanent", status=422, match_order_id=task_id)
    await stack.add_fault(endpoint="payment.refund", kind="transient", times=9, match_order_id=task_id)
    handle = await stack.submit(task_id)
    await wait_until(
        lambda: handle.query("status", result_type=TaskStatus),
        lambda s: s.state == TaskState.ERROR,
        timeout=90,
        what="the undo to be parked",
    )
    await handle.execute_update("request_retry", OperatorRequest(by="replay-test"), result_type=OperatorAnswer)
    await handle.result()


async def happy_preorder(stack: Stack, task_id: str) -> None:
    payload = order().model_dump(exclude={"address"})
    await (await stack.submit(task_id, payload, workflow="PreorderWorkflow")).result()


async def cooldown_order(stack: Stack, task_id: str) -> None:
    # Run 1 and the Supervisor's retry both fail; after the cool-down the third run succeeds.
    await stack.add_fault(endpoint="shipping.ship", kind="transient", times=4, match_order_id=task_id)
    await (await stack.submit(task_id)).result()


async def terminated_then_cleaned_up(stack: Stack, task_id: str) -> str:
    """Returns the id of the workflow whose history to keep: the Supervisor's cleanup."""
    await stack.add_fault(endpoint="shipping.ship", kind="latency", latency_ms=1500, match_order_id=task_id)
    handle = await stack.submit(task_id)
    await wait_until(lambda: stack.step_states(task_id), lambda s: s.get("ship") == "Processing", what="ship running")
    await handle.terminate("replay scenario: terminated mid-saga")
    cleanup = f"cleanup-{task_id}"
    await wait_until(lambda: stack.task_state(task_id), lambda s: s == "Compensated", timeout=60, what="cleanup")
    await stack.client.get_workflow_handle(cleanup).result()
    return cleanup


async def reset_mid_saga(stack: Stack, task_id: str) -> None:
    """`temporal workflow reset` to the last workflow task while ship runs: the history kept is
    the new run's, which starts with the old run's events and the reset's failed workflow task."""
    from tests.e2e.test_temporal_cli import temporal_cli

    await stack.add_fault(endpoint="shipping.ship", kind="latency", latency_ms=1500, match_order_id=task_id)
    handle = await stack.submit(task_id)
    await wait_until(lambda: stack.step_states(task_id), lambda s: s.get("ship") == "Processing", what="ship running")
    first_run = (await handle.describe()).run_id
    done = await temporal_cli(
        stack.settings.temporal.address,
        *("workflow", "reset", "--workflow-id", task_id, "--type", "LastWorkflowTask", "--reason", "replay", "--yes"),
    )
    assert done.returncode == 0, done.stderr
    new = stack.client.get_workflow_handle(task_id)
    assert (await new.describe()).run_id != first_run
    await new.result()


async def compensated_mid_step(stack: Stack, task_id: str) -> None:
    """An operator's compensate while ship's call is still being served: the attempt is
    cancelled, then undone with the others."""
    await stack.add_fault(endpoint="shipping.ship", kind="latency", latency_ms=2000, match_order_id=task_id)
    handle = await stack.submit(task_id)
    await wait_until(lambda: stack.step_states(task_id), lambda s: s.get("ship") == "Processing", what="ship running")
    await handle.execute_update(
        "request_compensate", OperatorRequest(by="replay-test", reason="undo mid-step"), result_type=OperatorAnswer
    )
    await handle.result()


def _supervisor(**changes: Any) -> dict[str, Any]:
    from sas.settings import SupervisorSettings

    base = {
        "interval_s": 0.5,
        "max_interval_s": 1.0,
        "failure_threshold": 3,
        "overdue_grace_s": 1.5,
        "retry_delay_s": 0.2,
        "orphan_after_s": 1.0,
        "orphan_check_s": 0.5,
        "cooldown_tries": 0,
    }
    return {"supervisor": SupervisorSettings(**{**base, **changes})}


def _worker(**changes: Any) -> dict[str, Any]:
    from sas.settings import WorkerSettings

    return {"worker": WorkerSettings(**changes)}


# name -> (settings overrides for the stack, the run). A run may return the id of the
# workflow to record; by default it is the task's own.
SCENARIOS: dict[str, tuple[dict[str, Any], Callable[[Stack, str], Awaitable[Any]]]] = {
    "order_happy": ({}, happy_order),
    "order_compensated": ({}, compensated_order),
    "order_supervisor_retry": ({}, supervisor_retry_order),
    "order_parked_operator_retry": ({}, parked_then_operator_retry),
    "order_cooldown": (_supervisor(retries=1, cooldown_s=1.0, cooldown_tries=2), cooldown_order),
    "cleanup_after_terminate": (_supervisor(), terminated_then_cleaned_up),
    "preorder_happy": ({}, happy_preorder),
    "order_reset_mid_saga": ({}, reset_mid_saga),
    "order_compensated_mid_step": ({}, compensated_mid_step),
    # The same, once a cancelled attempt is waited for: ship's undo follows the attempt's end.
    "order_compensated_mid_step_waited": ({}, compensated_mid_step),
    # Recorded with step results: the refund carries the charge's result.
    "order_step_results": ({}, compensated_order),
    # Recorded with service queues: each Agent, forward and undo, on its service's own queue.
    "order_service_queues": ({}, compensated_order),
    # Recorded with a compact plan (SAS_WORKER__COMPACT_PLANS): the accept's marker holds only
    # what it decided, the steps being the declared ones.
    "order_compact_plan": (_worker(compact_plans=True), compensated_order),
}
