"""A task type's pivot (its point of no return) in Temporal's time-skipping environment, with
fake Agents: ``(flight ‖ hotel) → charge (pivot) → cover (forward only)``.

Before the pivot, or with the pivot refused for good, the task is undone as any other. Once the
pivot may have had its effect, no compensate applies - the Supervisor's, an operator's, the
UI's signal, a workflow cancellation - except an operator's forced one, with a reason, audited."""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from sas.task_models import StepState, TaskState, TaskStatus
from tests.helpers import wait_until
from tests.scheduler.conftest import running
from tests.scheduler.fakes import Services
from tests.scheduler.test_shell import refused, result, start, states, status, step_state

PIVOT_TRIP = "PivotTripTestWorkflow"
SUPERVISOR = {"by": "supervisor", "decision_id": "7"}


def events(s: TaskStatus, text: str) -> list[str]:
    return [e for e in s.events if text in e]


async def test_the_pivot_refused_for_good_still_undoes_the_steps_before_it(skipping_env: WorkflowEnvironment) -> None:
    services = Services(behaviour={"testcard.charge": "refuse"})
    async with running(skipping_env, services) as queue:
        handle = await start(skipping_env, PIVOT_TRIP, queue)
        await wait_until(lambda: status(handle), step_state("charge", StepState.FAILED), timeout=30)
        await handle.signal("compensate", {"step": "charge", "failure_count": 1, **SUPERVISOR})
        done = await result(handle)
    assert done.state == TaskState.COMPENSATED
    assert set(services.undone()) >= {"testair.cancel", "testinn.cancel"}
    assert states(done)["cover"] == "Skipped"


async def test_past_the_pivot_no_compensate_applies_unless_forced_with_a_reason(
    skipping_env: WorkflowEnvironment,
) -> None:
    # The charge's service stays away: every attempt may have charged, so the task is past the pivot.
    services = Services(behaviour={"testcard.charge": "down"})
    async with running(skipping_env, services) as queue:
        handle = await start(skipping_env, PIVOT_TRIP, queue)
        await wait_until(lambda: status(handle), step_state("charge", StepState.FAILED), timeout=30)

        # The Supervisor's decision and the UI's signal are ignored, with the reason in the events.
        await handle.signal("compensate", {"step": "charge", "failure_count": 1, **SUPERVISOR})
        await handle.signal("compensate", {"by": "ui-user"})
        ignored = await wait_until(
            lambda: status(handle), lambda s: len(events(s, "past the point of no return")) == 2, timeout=30
        )
        assert "the pivot charge has been attempted (Failed)" in ignored.events[-1]
        # An operator's update is refused at once; forcing it needs a reason.
        assert "sas compensate --force" in await refused(handle, "request_compensate", {"by": "bob"})
        assert "needs a reason" in await refused(handle, "request_compensate", {"by": "bob", "force": True})
        forced = {"by": "bob", "force": True, "reason": "the customer cancelled; refund by hand agreed"}
        await handle.execute_update("request_compensate", forced)
        done = await result(handle)
    assert done.state == TaskState.COMPENSATED
    assert set(services.undone()) == {"testcard.refund", "testair.cancel", "testinn.cancel"}
    [audit] = [a for a in services.audits if a.actor == "bob"]
    assert audit.action == "compensate --force" and audit.reason == forced["reason"]
    assert "forced: the pivot charge has been attempted" in audit.changed


async def test_a_step_after_the_pivot_refused_for_good_is_parked_never_undone(
    skipping_env: WorkflowEnvironment,
) -> None:
    services = Services(behaviour={"testcover.cover": "refuse"})
    async with running(skipping_env, services) as queue:
        handle = await start(skipping_env, PIVOT_TRIP, queue)
        await wait_until(lambda: status(handle), step_state("cover", StepState.FAILED), timeout=30)
        assert "step cover, after the pivot charge, has run" in await refused(
            handle, "request_compensate", {"by": "bob"}
        )
        # The Supervisor parks it (policy.py never decides compensate past the pivot).
        await handle.signal("park", {"step": "cover", "failure_count": 1, **SUPERVISOR})
        await wait_until(lambda: status(handle), step_state("cover", StepState.ERROR), timeout=30)
        assert services.undone() == []
        # The operator fixes the cause, and retries.
        services.behaviour["testcover.cover"] = "ok"
        await handle.execute_update("request_retry", {"by": "bob", "reason": "cover fixed"})
        done = await result(handle)
    assert done.state == TaskState.PROCESSED
    assert services.undone() == []


async def test_a_workflow_cancelled_past_the_pivot_goes_on_and_undoes_nothing(
    skipping_env: WorkflowEnvironment,
) -> None:
    services = Services(behaviour={"testcover.cover": "held"})
    async with running(skipping_env, services) as queue:
        handle: WorkflowHandle[Any, Any] = await start(skipping_env, PIVOT_TRIP, queue)
        await wait_until(lambda: status(handle), step_state("cover", StepState.PROCESSING), timeout=30)
        await handle.cancel()
        await wait_until(lambda: status(handle), lambda s: bool(events(s, "workflow cancellation refused")), timeout=30)
        services.released.set()
        done = await asyncio.wait_for(result(handle), timeout=60)
    assert done.state == TaskState.PROCESSED
    assert services.undone() == []
    assert [name for name, _ in services.effects].count("testcover.cover") == 1
