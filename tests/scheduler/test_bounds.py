"""What a task keeps of what its services and signals say is bounded, so that its status query
stays small whatever they say: an error message of 900 KB, a retry signal naming a step of
1.5 MB, hundreds of signals. And a retry the task ignores changes nothing, not even the
FailureCount it carries. Time-skipping environment, fake Agents."""

from __future__ import annotations

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment

from sas.task_models import StepState, TaskState, TaskStatus
from sas.task_models.text import MAX_ERROR_TEXT, MAX_EVENT_TEXT, json_size
from tests.helpers import wait_until
from tests.scheduler.conftest import running
from tests.scheduler.fakes import Services
from tests.scheduler.test_shell import start, status, step_state

# What a status of the trip (four steps) may weigh at most, as escaped JSON: 200 events and four
# error messages at their bounds, and room for the rest.
STATUS_BOUND = 200 * MAX_EVENT_TEXT + 4 * MAX_ERROR_TEXT + 16 * 1024


def weight(seen: TaskStatus) -> int:
    return json_size(seen.model_dump_json())


async def test_a_huge_error_message_is_cut_in_the_status_and_its_events(skipping_env: WorkflowEnvironment) -> None:
    services = Services(behaviour={"testinn.book": "verbose"})
    async with running(skipping_env, services) as queue:
        handle = await start(skipping_env, "TripTestWorkflow", queue)
        seen = await wait_until(lambda: status(handle), step_state("hotel", StepState.FAILED), timeout=30)
        await handle.signal("compensate", {"step": "hotel", "failure_count": 1, "by": "supervisor"})
        await handle.result()
    hotel = next(s for s in seen.steps if s.name == "hotel")
    assert hotel.last_error is not None and hotel.last_error.startswith("testinn.book refused: éé")
    assert "more characters cut" in hotel.last_error
    assert json_size(hotel.last_error) <= MAX_ERROR_TEXT
    assert all(json_size(e) <= MAX_EVENT_TEXT for e in seen.events)
    assert weight(seen) <= STATUS_BOUND
    # The mirror gets the cut text too.
    written = [t.last_error for t in services.transitions if t.step == "hotel" and t.last_error]
    assert written and all(json_size(text) <= MAX_ERROR_TEXT for text in written)


async def test_a_retry_naming_a_huge_step_is_refused_and_nothing_of_it_kept(skipping_env: WorkflowEnvironment) -> None:
    huge = "x" * 1_500_000
    services = Services(behaviour={"testinn.book": "refuse"})
    async with running(skipping_env, services) as queue:
        handle = await start(skipping_env, "TripTestWorkflow", queue)
        await wait_until(lambda: status(handle), step_state("hotel", StepState.FAILED), timeout=30)
        for _ in range(3):
            await handle.signal("retry", {"step": huge, "by": "mallory"})
        with pytest.raises(WorkflowUpdateFailedError):  # beyond the bound: refused before any validator
            await handle.execute_update("request_retry", {"step": huge})
        seen = await wait_until(
            lambda: status(handle), lambda s: sum("retry signal rejected" in e for e in s.events) == 3
        )
    assert all("step: String should have at most 32 characters" in e for e in seen.events if "rejected" in e)
    assert weight(seen) <= STATUS_BOUND
    assert services.audits == []  # nothing applied
    assert next(s for s in seen.steps if s.name == "hotel").state == StepState.FAILED


async def test_an_ignored_retry_leaves_failure_count_as_it_was(skipping_env: WorkflowEnvironment) -> None:
    services = Services(behaviour={"testinn.book": "refuse"})
    async with running(skipping_env, services) as queue:
        handle = await start(skipping_env, "TripTestWorkflow", queue)
        await wait_until(lambda: status(handle), step_state("hotel", StepState.FAILED), timeout=30)
        # The charge has not started (its stage waits for the hotel): the retry does not apply.
        await handle.signal("retry", {"step": "charge", "failure_count": 100_000, "by": "supervisor"})
        seen = await wait_until(lambda: status(handle), lambda s: any("ignored" in e for e in s.events))
    assert "step charge is Pending" in next(e for e in seen.events if "ignored" in e)
    assert {s.name: s.failure_count for s in seen.steps} == {"flight": 0, "hotel": 0, "charge": 0, "insure": 0}
    assert seen.state == TaskState.FAILED


async def test_the_status_keeps_the_newest_events_and_counts_the_dropped(skipping_env: WorkflowEnvironment) -> None:
    services = Services(behaviour={"testinn.book": "refuse"})
    reason = "é" * 2000  # the most a reason may be: 12 KB as escaped JSON
    async with running(skipping_env, services) as queue:
        handle = await start(skipping_env, "TripTestWorkflow", queue)
        before = await wait_until(lambda: status(handle), step_state("hotel", StepState.FAILED), timeout=30)
        for n in range(230):
            await handle.signal("retry", {"step": "flight", "by": f"op{n}", "reason": reason})
        seen = await wait_until(lambda: status(handle), lambda s: any("from op229 " in e for e in s.events))
    assert len(seen.events) == 200
    # The events before the signals (the hotel's failure among them) and the first 30 signals'
    # were dropped, and counted.
    assert seen.events_dropped == len(before.events) + 30
    assert "from op30 " in seen.events[0] and "from op229 " in seen.events[-1]
    assert all(json_size(e) <= MAX_EVENT_TEXT for e in seen.events)
    assert weight(seen) <= STATUS_BOUND


async def test_an_ignored_retry_still_counts_the_overrun_of_a_running_step(skipping_env: WorkflowEnvironment) -> None:
    """The one count an ignored retry keeps: the Supervisor's, of a step overrunning its complete-by."""
    services = Services(behaviour={"testinn.book": "held"})
    async with running(skipping_env, services) as queue:
        handle = await start(skipping_env, "TripTestWorkflow", queue)
        await wait_until(lambda: status(handle), step_state("hotel", StepState.PROCESSING), timeout=30)
        await handle.signal("retry", {"step": "hotel", "failure_count": 1, "by": "supervisor"})
        seen = await wait_until(lambda: status(handle), lambda s: any("ignored" in e for e in s.events))
        services.released.set()
        await handle.result()
    assert "step hotel is Processing" in next(e for e in seen.events if "ignored" in e)
    assert next(s for s in seen.steps if s.name == "hotel").failure_count == 1
