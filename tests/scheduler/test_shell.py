"""The Scheduler's shell in Temporal's time-skipping environment, with fake Agents: parallel
groups, wait steps, conditions, operator requests and the clean-up."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.client import WorkflowFailureError, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from sas.task_models import StepState, TaskResult, TaskState, TaskStatus
from sas.task_models.cleanup import CleanupInput, CleanupStep
from tests.helpers import fresh_id, wait_until
from tests.scheduler.conftest import running
from tests.scheduler.fakes import FAST, Services

TRIP = {"traveller": "ada", "amount_cents": 12_000}


async def status(handle: WorkflowHandle[Any, Any]) -> TaskStatus:
    return await handle.query("status", result_type=TaskStatus)


def step_state(name: str, state: StepState) -> Any:
    return lambda s: any(x.name == name and x.state == state for x in s.steps)


async def start(env: WorkflowEnvironment, workflow: str, queue: str, payload: Any = TRIP) -> WorkflowHandle[Any, Any]:
    return await env.client.start_workflow(workflow, payload, id=fresh_id("t"), task_queue=queue)


async def refused(handle: WorkflowHandle[Any, Any], update: str, request: Any) -> str:
    """The reason an update's validator gave for refusing ``request``."""
    with pytest.raises(WorkflowUpdateFailedError) as failed:
        await handle.execute_update(update, request)
    return str(failed.value.cause)


async def result(handle: WorkflowHandle[Any, Any]) -> TaskResult:
    return TaskResult.model_validate(await handle.result())


def states(done: TaskResult) -> dict[str, str]:
    return {s.name: str(s.state) for s in done.steps}


async def test_a_parallel_group_runs_then_the_next_stage_and_a_false_condition_skips(
    skipping_env: WorkflowEnvironment,
) -> None:
    services = Services(behaviour={"testinn.book": "slow"})
    async with running(skipping_env, services) as queue:
        done = await result(await start(skipping_env, "TripTestWorkflow", queue))
    assert done.state == TaskState.PROCESSED
    assert states(done) == {"flight": "Processed", "hotel": "Processed", "charge": "Processed", "insure": "Skipped"}
    started = [name for name, _, _ in services.attempts]
    # Both bookings started before either finished: the slow hotel completed after the flight.
    assert started[:2] in (["testair.book", "testinn.book"], ["testinn.book", "testair.book"])
    assert [name for name, _ in services.effects] == ["testair.book", "testinn.book", "testcard.charge"]
    assert services.notes("insure") == ["skipped: no insurance asked for"]
    assert any(t.task_state == TaskState.PROCESSED for t in services.transitions)


async def test_a_branch_refused_for_good_undoes_the_group_unfinished_first(skipping_env: WorkflowEnvironment) -> None:
    services = Services(behaviour={"testinn.book": "refuse"})
    async with running(skipping_env, services) as queue:
        handle = await start(skipping_env, "TripTestWorkflow", queue)
        await wait_until(lambda: status(handle), step_state("hotel", StepState.FAILED), timeout=30)
        # The Supervisor's decision, as its outbox sends it.
        await handle.signal("compensate", {"step": "hotel", "failure_count": 1, "decision_id": "7", "by": "supervisor"})
        done = await result(handle)
    assert done.state == TaskState.COMPENSATED
    assert services.undone() == ["testinn.cancel", "testair.cancel"]
    assert "testcard.charge" not in [name for name, _ in services.effects]
    assert [(a.action, a.actor, a.decision_id) for a in services.audits] == [("compensate", "supervisor", "7")]


async def test_completed_steps_are_undone_in_reverse_order_of_completion(skipping_env: WorkflowEnvironment) -> None:
    services = Services(behaviour={"testinn.book": "slow", "testcard.charge": "refuse"})
    async with running(skipping_env, services) as queue:
        handle = await start(skipping_env, "TripTestWorkflow", queue)
        await wait_until(lambda: status(handle), step_state("charge", StepState.FAILED), timeout=30)
        await handle.execute_update("request_compensate", {"by": "alice", "reason": "card declined"})
        done = await result(handle)
    # The hotel completed after the flight: it is undone before it. The charge never completed.
    assert services.undone() == ["testcard.refund", "testinn.cancel", "testair.cancel"]
    assert states(done)["insure"] == "Skipped"


async def test_an_approval_lets_the_task_go_on(skipping_env: WorkflowEnvironment) -> None:
    services = Services()
    async with running(skipping_env, services) as queue:
        handle = await start(skipping_env, "ApprovedTripTestWorkflow", queue)
        waiting = await wait_until(lambda: status(handle), step_state("approval", StepState.WAITING), timeout=30)
        approval = next(s for s in waiting.steps if s.name == "approval")
        assert approval.note is not None and "waits for 'approve' until" in approval.note
        assert approval.wait_until is not None
        assert "unknown step 'nope'" in await refused(handle, "request_approve", {"step": "nope", "by": "bob"})
        await handle.execute_update("request_approve", {"by": "bob", "reason": "budget ok"})
        done = await result(handle)
    assert done.state == TaskState.PROCESSED
    approved = next(s for s in done.steps if s.name == "approval")
    assert approved.result is not None and approved.result["approved_by"] == "bob"
    assert ("approve", "bob") in [(a.action, a.actor) for a in services.audits]
    assert services.transitions[0].state == StepState.WAITING and services.transitions[0].complete_by is not None


async def test_a_rejection_undoes_the_task(skipping_env: WorkflowEnvironment) -> None:
    services = Services()
    async with running(skipping_env, services) as queue:
        handle = await start(skipping_env, "ApprovedTripTestWorkflow", queue)
        await wait_until(lambda: status(handle), step_state("approval", StepState.WAITING), timeout=30)
        await handle.signal("approve", {"approved": False, "by": "carol", "reason": "too dear"})
        done = await result(handle)
    assert done.state == TaskState.COMPENSATED
    assert services.effects == []  # nothing was booked, nothing undone
    assert states(done)["approval"] == "Skipped"
    assert ("compensate", "carol") in [(a.action, a.actor) for a in services.audits]


async def test_an_approval_deadline_days_away_passes_and_undoes(skipping_env: WorkflowEnvironment) -> None:
    services = Services()
    async with running(skipping_env, services) as queue:
        done = await result(await start(skipping_env, "ApprovedTripTestWorkflow", queue))
    assert done.state == TaskState.COMPENSATED
    assert services.effects == []
    assert ("compensate", "deadline") in [(a.action, a.actor) for a in services.audits]


async def test_a_deadline_that_says_continue_goes_on(skipping_env: WorkflowEnvironment) -> None:
    services = Services()
    async with running(skipping_env, services) as queue:
        done = await result(await start(skipping_env, "RelaxedTripTestWorkflow", queue))
    assert done.state == TaskState.PROCESSED
    assert any("went on" in n for n in services.notes("approval"))
    assert [name for name, _ in services.effects] == ["testcard.charge"]


async def test_a_timer_wait_waits_then_goes_on(skipping_env: WorkflowEnvironment) -> None:
    services = Services()
    async with running(skipping_env, services) as queue:
        done = await result(await start(skipping_env, "LaterTripTestWorkflow", queue))
    assert done.state == TaskState.PROCESSED
    assert any(n.startswith("waited until") for n in services.notes("cool_off"))


async def test_a_stale_decision_never_unparks_an_undo(skipping_env: WorkflowEnvironment) -> None:
    """Re-sending the Supervisor's first decision once the undo is parked."""
    services = Services(behaviour={"testcard.charge": "refuse", "testcard.refund": "refuse"})
    async with running(skipping_env, services) as queue:
        handle = await start(skipping_env, "TripTestWorkflow", queue)
        await wait_until(lambda: status(handle), step_state("charge", StepState.FAILED), timeout=30)
        first = {"step": "charge", "failure_count": 1, "decision_id": "1", "by": "supervisor"}
        await handle.signal("compensate", first)
        await wait_until(lambda: status(handle), step_state("charge", StepState.COMPENSATION_FAILED), timeout=30)
        await handle.signal("park", {"step": "charge", "failure_count": 2, "decision_id": "2", "by": "supervisor"})
        await wait_until(lambda: status(handle), step_state("charge", StepState.ERROR), timeout=30)
        refunds = len([a for a in services.attempts if a[0] == "testcard.refund"])
        await handle.signal("compensate", first)  # the stale duplicate
        assert "already compensating" in await refused(handle, "request_compensate", first)
        seen = await wait_until(
            lambda: status(handle), lambda s: any("compensate from supervisor ignored" in e for e in s.events)
        )
        assert next(s for s in seen.steps if s.name == "charge").failure_count == 2
        assert len([a for a in services.attempts if a[0] == "testcard.refund"]) == refunds
        # An operator's compensate retries the parked undo.
        services.behaviour["testcard.refund"] = "ok"
        await handle.execute_update("request_compensate", {"by": "dave", "reason": "refund service fixed"})
        done = await result(handle)
    assert done.state == TaskState.COMPENSATED
    assert ("compensate", "dave") in [(a.action, a.actor) for a in services.audits]


async def test_a_request_that_does_not_apply_is_refused_by_update_and_ignored_by_signal(
    skipping_env: WorkflowEnvironment,
) -> None:
    services = Services(behaviour={"testinn.book": "refuse"})
    async with running(skipping_env, services) as queue:
        handle = await start(skipping_env, "TripTestWorkflow", queue)
        await wait_until(lambda: status(handle), step_state("hotel", StepState.FAILED), timeout=30)
        assert "step flight is Processed; the step waiting" in await refused(
            handle, "request_retry", {"step": "flight"}
        )
        with pytest.raises(WorkflowUpdateFailedError):  # beyond the bound: refused before any validator
            await handle.execute_update("request_retry", {"failure_count": 99_999_999_999})
        await handle.signal("retry", {"failure_count": 99_999_999_999})
        await handle.signal("retry", {"step": "flight"})
        seen = await wait_until(lambda: status(handle), lambda s: len(s.events) >= 3)
        assert any("invalid request" in e and "failure_count" in e for e in seen.events)
        assert any("retry from operator ignored: step flight is Processed" in e for e in seen.events)
        services.behaviour["testinn.book"] = "ok"
        answer = await handle.execute_update("request_retry", {"step": "hotel", "by": "erin"})
        assert "retrying step hotel" in str(answer)
        done = await result(handle)
    assert done.state == TaskState.PROCESSED
    assert ("retry", "erin") in [(a.action, a.actor) for a in services.audits]


async def test_the_cleanup_runs_the_same_engine_on_the_service_queue(skipping_env: WorkflowEnvironment) -> None:
    services = Services(behaviour={"testcard.refund": "refuse"})
    task = fresh_id("dead")
    cleanup = CleanupInput(
        task_id=task,
        task_type="trip",
        payload=TRIP,
        steps=[
            CleanupStep(
                name="flight",
                position=0,
                state="Processed",
                compensation="testair.cancel",
                idempotency_key=f"{task}:flight",
                task_queue="svc-flights",
                version=10,
            ),
            CleanupStep(
                name="hotel",
                position=1,
                state="Processed",
                compensation="testinn.cancel",
                idempotency_key=f"{task}:hotel",
                task_queue="svc-hotels",
                version=20,
            ),
            CleanupStep(
                name="charge",
                position=2,
                state="Processing",
                compensation="testcard.refund",
                idempotency_key=f"{task}:charge",
                task_queue="svc-cards",
                version=30,
            ),
            CleanupStep(
                name="insure", position=3, state="Pending", compensation=None, idempotency_key=f"{task}:insure"
            ),
        ],
        compensation_policy=FAST,
        reason="workflow terminated",
    )
    services.cleanups[task] = cleanup  # the Supervisor decided it: the plan the state store gives
    async with running(skipping_env, services, extra_queues=("svc-flights", "svc-hotels", "svc-cards")) as queue:
        handle = await skipping_env.client.start_workflow(
            "CleanupWorkflow", cleanup, id=f"cleanup-{task}", task_queue=queue
        )
        await wait_until(lambda: status(handle), step_state("charge", StepState.COMPENSATION_FAILED), timeout=30)
        services.behaviour["testcard.refund"] = "ok"
        await handle.execute_update("request_retry", {"by": "frank", "reason": "refunds back"})
        states_now = await handle.result()
    assert states_now == {"flight": "Compensated", "hotel": "Compensated", "charge": "Compensated", "insure": "Skipped"}
    assert services.undone() == ["testcard.refund", "testinn.cancel", "testair.cancel"]
    queues = {name: q for name, _, q in services.attempts}
    assert queues == {"testcard.refund": "svc-cards", "testinn.cancel": "svc-hotels", "testair.cancel": "svc-flights"}
    assert ("retry", "frank") in [(a.action, a.actor) for a in services.audits]


@pytest.mark.parametrize("args", [[], [TRIP, TRIP]], ids=["no argument", "two arguments"])
async def test_a_wrong_argument_count_fails_at_once_not_for_ever(
    skipping_env: WorkflowEnvironment, args: list[Any]
) -> None:
    """The run fails non-retryably instead of a workflow task failing for ever."""
    services = Services()
    async with running(skipping_env, services) as queue:
        handle = await skipping_env.client.start_workflow(
            "TripTestWorkflow", args=args, id=fresh_id("t"), task_queue=queue
        )
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "InvalidInput" and cause.non_retryable
    assert f"started with {len(args)}" in cause.message
    assert services.accepted == []


async def test_a_resubmitted_incarnations_callbacks_have_their_own_ids(skipping_env: WorkflowEnvironment) -> None:
    """a receiver that drops duplicate webhook ids must not drop incarnation 2's events."""
    services = Services(incarnation=2)
    async with running(skipping_env, services) as queue:
        handle = await start(skipping_env, "LaterTripTestWorkflow", queue, {**TRIP, "callback_url": "https://x.test/h"})
        await result(handle)
    ids = [e.event_id for e in services.callbacks]
    assert ids and all(i.startswith(f"{handle.id}#2:") for i in ids)
    assert ids[0].endswith(":received") and len(set(ids)) == len(ids)
