"""Only sas starts sas's work. An activity runs only for the workflow that owns it: a client of
the namespace that runs a registered Agent on its own (``temporal activity execute``) is refused
before any request leaves the worker. A clean-up undoes only what the Supervisor decided to
undo, derived from the state store and Temporal, never from its input."""

from __future__ import annotations

import asyncio
import json
import subprocess
from datetime import timedelta
from typing import Any

import pytest
from temporalio import workflow
from temporalio.client import WorkflowFailureError
from temporalio.common import RetryPolicy
from temporalio.worker import Worker

from sas.activities.cleanup_plans import cleanup_input
from sas.runtime.activity_owners import CLEANUP_WORKFLOW, SUPERVISOR_WORKFLOW, Owners
from sas.task_models.queues import service_queue
from tests.cli.test_cli import ORDER_FLAGS, as_json, sas
from tests.conftest import temporal_binary
from tests.helpers import fresh_id
from tests.stack import Stack

OWNERS = Owners(
    agents_of={"OrderWorkflow": frozenset({"payment.charge", "payment.refund", "shipping.ship"})},
    undos=frozenset({"payment.refund"}),
)


async def run_standalone(
    stack: Stack, activity_type: str, task_queue: str, arg: dict[str, object]
) -> subprocess.CompletedProcess[str]:
    """What any client of the namespace can do: `temporal activity execute`, no workflow."""
    argv = [
        temporal_binary(),
        *("activity", "execute", "--address", stack.settings.temporal.address),
        *("--activity-id", fresh_id("standalone"), "--type", activity_type, "--task-queue", task_queue),
        *("--start-to-close-timeout", "20s", "--schedule-to-close-timeout", "60s", "--input", json.dumps(arg)),
    ]
    return await asyncio.to_thread(subprocess.run, argv, capture_output=True, text=True, timeout=90)


def test_an_activity_runs_only_for_the_workflow_that_owns_it() -> None:
    assert OWNERS.refusal("payment.refund", None) == "it was started outside any workflow (a standalone activity)"
    assert OWNERS.refusal("payment.charge", "OrderWorkflow") is None
    assert OWNERS.refusal("mirror.accept", "OrderWorkflow") is None
    # A workflow of somebody else's on sas's queue reaches neither the services nor the mirror.
    assert "not a workflow of sas's" in str(OWNERS.refusal("payment.refund", "MyOwnWorkflow"))
    assert "not a workflow of sas's" in str(OWNERS.refusal("mirror.record", "MyOwnWorkflow"))
    # A clean-up undoes; it never makes a forward call, whatever its input names.
    assert OWNERS.refusal("payment.refund", CLEANUP_WORKFLOW) is None
    assert OWNERS.refusal("payment.charge", CLEANUP_WORKFLOW) == "a clean-up runs undo Agents only"
    # The Supervisor's activities are the Supervisor workflow's alone.
    assert OWNERS.refusal("supervisor.apply", SUPERVISOR_WORKFLOW) is None
    assert "only the Supervisor workflow" in str(OWNERS.refusal("supervisor.apply", "OrderWorkflow"))
    assert "standalone" in str(OWNERS.refusal("supervisor.apply", None))


async def test_a_standalone_refund_is_refused_and_nothing_reaches_the_service(stack: Stack) -> None:
    """The probe's F6: `temporal activity execute --type payment.refund` on a finished order."""
    task_id = fresh_id("standalone")
    done = as_json(await sas(stack, "submit", *ORDER_FLAGS, "--id", task_id, "--wait", "--json"))
    assert done["result"]["state"] == "Processed"
    record = await stack.record(task_id)
    assert record is not None
    charge = next(s for s in record.steps if s.name == "charge")
    call = {
        "task_id": task_id,
        "task_type": "order",
        "step": "charge",
        "position": charge.position,
        "idempotency_key": f"{charge.idempotency_key}:undo",
        "target_key": charge.idempotency_key,
        "compensation": True,
        "payload": record.task.payload,
        "stamp": {"seq": 1_000_000},
    }
    ran = await run_standalone(
        stack,
        "payment.refund",
        service_queue(stack.settings.temporal.task_queue, "payment"),
        call,
    )
    said = ran.stdout + ran.stderr
    assert ran.returncode != 0, said
    assert "payment.refund refused: it was started outside any workflow" in said, said
    effects = [(entry["service"], entry["action"]) for entry in await stack.ledger(task_id)]
    assert ("payment", "charge") in effects and not [e for e in effects if e[0] == "payment" and e[1] != "charge"]
    assert await stack.task_state(task_id) == "Processed"


async def test_a_clean_up_nobody_decided_is_refused_and_undoes_nothing(stack: Stack) -> None:
    """The probe's F1: a CleanupWorkflow started by hand, with an input naming the finished
    order's steps exactly as the Supervisor would, refunds nothing: the clean-up derives what it
    undoes, and whether it may, from the state store and Temporal."""
    task_id = fresh_id("forged-cleanup")
    done = as_json(await sas(stack, "submit", *ORDER_FLAGS, "--id", task_id, "--wait", "--json"))
    assert done["result"]["state"] == "Processed"
    record = await stack.record(task_id)
    assert record is not None
    forged = cleanup_input(record, stack.settings, "a hand-started clean-up")
    handle = await stack.client.start_workflow(
        "CleanupWorkflow", forged, id=f"cleanup-{task_id}", task_queue=stack.settings.temporal.task_queue
    )
    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(handle.result(), timeout=60)
    assert "refused: no clean-up of it was decided" in str(failed.value.cause)

    effects = [(entry["service"], entry["action"]) for entry in await stack.ledger(task_id)]
    assert ("payment", "charge") in effects and ("payment", "refund") not in effects, effects
    assert await stack.task_state(task_id) == "Processed"
    [alert] = [a for a in await stack.alerts(task_id) if a.kind == "cleanup_refused"]
    assert alert.severity == "critical" and "nothing was undone" in alert.suggested_action


async def test_a_standalone_supervisor_activity_is_refused(stack: Stack) -> None:
    """`supervisor.apply` run on its own could claim and send any decision it was given: the
    Supervisor's worker runs its activities for the Supervisor workflow alone."""
    ran = await run_standalone(
        stack, "supervisor.apply", stack.settings.temporal.supervisor_task_queue, {"decisions": [], "shard": 0}
    )
    said = ran.stdout + ran.stderr
    assert ran.returncode != 0, said
    assert "supervisor.apply refused: it was started outside any workflow" in said, said


@workflow.defn(name=CLEANUP_WORKFLOW, sandboxed=False)
class LookAlikeCleanup:
    """Someone else's workflow that borrows the clean-up's name, on a queue of its own, and asks
    sas's payment worker for a refund (with a seal of its own making, or none)."""

    @workflow.run
    async def run(self, ask: dict[str, Any]) -> Any:
        return await workflow.execute_activity(
            "payment.refund",
            ask["call"],
            task_queue=ask["queue"],
            start_to_close_timeout=timedelta(seconds=20),
            retry_policy=RetryPolicy(maximum_attempts=1),
        )


@pytest.mark.parametrize("seal", [None, "A" * 22])
async def test_a_look_alike_clean_up_on_its_own_queue_is_refused_by_sas_s_agents(
    stack: Stack, seal: str | None
) -> None:
    """Ownership is by identity, not by name: a workflow called CleanupWorkflow that sas did
    not start cannot seal its call, so sas's payment worker refunds nothing for it."""
    task_id = fresh_id("look-alike")
    done = as_json(await sas(stack, "submit", *ORDER_FLAGS, "--id", task_id, "--wait", "--json"))
    assert done["result"]["state"] == "Processed"
    record = await stack.record(task_id)
    assert record is not None
    charge = next(s for s in record.steps if s.name == "charge")
    call = {
        "task_id": task_id,
        "task_type": "order",
        "step": "charge",
        "position": charge.position,
        "idempotency_key": f"{charge.idempotency_key}:undo",
        "target_key": charge.idempotency_key,
        "compensation": True,
        "payload": record.task.payload,
        "stamp": {"seq": 1_000_000},
        "forward_result": charge.result,
        "seal": seal,
    }
    own_queue = fresh_id("their-queue")
    ask = {"call": call, "queue": service_queue(stack.settings.temporal.task_queue, "payment")}
    async with Worker(stack.client, task_queue=own_queue, workflows=[LookAlikeCleanup]):
        with pytest.raises(WorkflowFailureError) as failed:
            await stack.client.execute_workflow(
                CLEANUP_WORKFLOW, ask, id=fresh_id("their-cleanup"), task_queue=own_queue
            )
    said = str(failed.value.cause) + str(getattr(failed.value.cause, "cause", ""))
    assert "payment.refund refused" in said and "carries no seal" in said, said
    effects = [(entry["service"], entry["action"]) for entry in await stack.ledger(task_id)]
    assert ("payment", "charge") in effects and ("payment", "refund") not in effects, effects
    assert await stack.task_state(task_id) == "Processed"


async def test_an_unsealed_call_runs_only_while_the_upgrade_setting_lets_it() -> None:
    """SAS_SEAL__ACCEPT_UNSEALED_CALLS: attempts started by a sas from before seals still run
    while it is set; otherwise an Agent's call without its run's seal is refused."""
    from temporalio.testing import ActivityEnvironment

    from sas.runtime.activity_owners import OwnedActivities
    from sas.task_models import MirrorStamp, StepCall, seals

    call = StepCall(
        task_id="t-1", task_type="order", step="charge", position=1, idempotency_key="t-1:charge", payload={},
        stamp=MirrorStamp(seq=1),
    )  # fmt: skip
    strict, lenient = OwnedActivities(OWNERS), OwnedActivities(OWNERS, accept_unsealed=True)

    async def verdicts() -> tuple[str | None, str | None, str | None]:
        info = ActivityEnvironment().info
        sealed = call.model_copy(
            update={"seal": seals.call_seal(info.workflow_id or "", info.workflow_run_id or "", "payment.charge", call)}
        )
        return (
            strict.unsealed("payment.charge", [call]),
            lenient.unsealed("payment.charge", [call]),
            strict.unsealed("payment.charge", [sealed]),
        )

    refused, let, sealed_ok = await ActivityEnvironment().run(verdicts)
    assert refused is not None and "carries no seal" in refused
    assert let is None and sealed_ok is None
