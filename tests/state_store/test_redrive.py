"""A redrive's next incarnation in the state store, on SQLite and PostgreSQL: the steps before
the step it runs again from are kept done with their results and keys; a step that may have
landed keeps its key, one undone or never run gets a new one; the refusals leave the finished
incarnation as it was; an accept retried later finds what the first one kept."""

from __future__ import annotations

from datetime import timedelta

import pytest

from sas.state_store.incarnations import redrive_as_accepted, resubmit_task
from sas.state_store.mirror import record_transitions
from sas.state_store.queries import get_task
from sas.state_store.tables import AuditEntry
from sas.task_models import Resubmission, StepPlan, StepPolicyValues, StepState, StepTransition, TaskAccepted, TaskState
from sas.task_models.versions import Phase, version_of
from tests.helpers import fresh_id
from tests.state_store.test_mirror import NOW

STEPS = ("reserve", "charge", "ship", "notify")


def accepted(
    task_id: str, chain: str, resubmission: Resubmission | None = None, pivot: str | None = None
) -> TaskAccepted:
    roles = {
        s: ("pivot" if s == pivot else "forward_only" if pivot and i > STEPS.index(pivot) else None)
        for i, s in enumerate(STEPS)
    }
    return TaskAccepted(
        chain_id=chain,
        run_id=chain,
        task_id=task_id,
        task_type="order",
        workflow_type="OrderWorkflow",
        task_queue="q",
        payload={"sku": "S"},
        accepted_at=NOW,
        resubmission=resubmission,
        steps=[
            StepPlan(
                name=n,
                position=i,
                agent=f"svc.{n}",
                compensation=f"svc.un{n}",
                idempotency_key=f"{task_id}:{n}",
                policy=StepPolicyValues(complete_by_s=7),
                pivot=roles[n],
            )
            for i, n in enumerate(STEPS)
        ],
    )  # fmt: skip


async def finished_in_error(
    sessions, writer, task_id: str, states: dict[str, StepState], pivot: str | None = None
) -> None:
    """The task's first incarnation (chain c1), its steps left in ``states`` and the task in Error."""
    assert (await writer.accept(accepted(task_id, "c1", pivot=pivot))).status == "new"
    moves = [
        StepTransition(
            task_id=task_id,
            step=name,
            version=version_of(seq, 0, Phase.SCHEDULER),
            state=state,
            at=NOW + timedelta(seconds=seq),
            result={"id": f"{name}-1"} if state == StepState.PROCESSED else None,
            task_state=TaskState.ERROR if seq == len(states) else None,
            chain_id="c1",
            run_id="c1",
        )
        for seq, (name, state) in enumerate(states.items(), start=1)
    ]
    async with sessions() as s:
        await record_transitions(s, moves)


async def rows(sessions, task_id: str) -> dict[str, tuple[str, str, object]]:
    async with sessions() as s:
        record = await get_task(s, task_id)
    assert record is not None
    return {r.name: (r.state, r.idempotency_key, r.result) for r in record.steps}


async def test_a_redrive_keeps_the_steps_before_its_step_with_their_results_and_keys(sessions, writer) -> None:
    task_id = fresh_id("rd")
    done = {"reserve": StepState.PROCESSED, "charge": StepState.PROCESSED, "ship": StepState.ERROR}
    await finished_in_error(sessions, writer, task_id, {**done, "notify": StepState.PENDING})
    again = accepted(task_id, "c2", Resubmission(of="c1", by="alice", reason="courier back", from_step="ship"))
    async with sessions() as s:
        outcome = await resubmit_task(s, again)
    assert outcome.status == "resubmitted" and outcome.incarnation == 2
    assert [(k.name, k.state, k.result) for k in outcome.kept or []] == [
        ("reserve", StepState.PROCESSED, {"id": "reserve-1"}),
        ("charge", StepState.PROCESSED, {"id": "charge-1"}),
    ]
    # The ship may have landed under its key: sent again under it. The notify never ran: a new key.
    assert outcome.keys == {
        "reserve": f"{task_id}:reserve",
        "charge": f"{task_id}:charge",
        "ship": f"{task_id}:ship",
        "notify": f"{task_id}#2:notify",
    }
    assert await rows(sessions, task_id) == {
        "reserve": ("Processed", f"{task_id}:reserve", {"id": "reserve-1"}),
        "charge": ("Processed", f"{task_id}:charge", {"id": "charge-1"}),
        "ship": ("Pending", f"{task_id}:ship", None),
        "notify": ("Pending", f"{task_id}#2:notify", None),
    }
    async with sessions() as s:
        record = await get_task(s, task_id)
    assert record is not None and record.task.state == TaskState.PENDING and record.task.incarnation == 2
    # The accept retried (same chain): what the first accept kept, never the plain incarnation's new keys.
    retried = await writer.accept(again)
    assert retried.status == "same_task"
    async with sessions() as s:
        again_outcome = await redrive_as_accepted(s, again, retried)
    assert again_outcome.kept == outcome.kept and again_outcome.keys == outcome.keys


async def test_the_redrive_is_audited_with_what_it_kept(sessions, writer) -> None:
    from sqlalchemy import select

    task_id = fresh_id("rd-audit")
    await finished_in_error(sessions, writer, task_id, {"reserve": StepState.PROCESSED, "charge": StepState.ERROR})
    again = accepted(task_id, "c2", Resubmission(of="c1", by="alice", reason="card fixed", from_step="charge"))
    async with sessions() as s:
        assert (await resubmit_task(s, again)).status == "resubmitted"
    async with sessions() as s:
        [entry] = (await s.scalars(select(AuditEntry).where(AuditEntry.task_id == task_id))).all()
    assert (entry.action, entry.actor, entry.reason) == ("redrive", "alice", "card fixed")
    assert "redriven from charge: reserve kept as done" in entry.changed


async def test_an_undone_step_is_run_again_under_a_new_key(sessions, writer) -> None:
    task_id = fresh_id("rd-undone")
    states = {"reserve": StepState.PROCESSED, "charge": StepState.COMPENSATED, "ship": StepState.COMPENSATION_FAILED}
    await finished_in_error(sessions, writer, task_id, states)
    again = accepted(task_id, "c2", Resubmission(of="c1", from_step="charge"))
    async with sessions() as s:
        outcome = await resubmit_task(s, again)
    assert outcome.keys is not None
    assert outcome.keys["charge"] == f"{task_id}#2:charge"  # refunded: a new charge is a new one
    assert outcome.keys["ship"] == f"{task_id}:ship"  # its undo failed: it may stand, so its key is kept


@pytest.mark.parametrize(
    ("states", "from_step", "why"),
    [
        (
            {"reserve": StepState.PROCESSED, "charge": StepState.COMPENSATED, "ship": StepState.ERROR},
            "ship",
            "step charge, before ship, is Compensated",
        ),
        ({"reserve": StepState.PROCESSED, "charge": StepState.ERROR}, "pack", "it has no step 'pack'"),
    ],
)
async def test_a_redrive_that_cannot_keep_its_steps_is_refused_and_changes_nothing(
    sessions, writer, states, from_step, why
) -> None:
    task_id = fresh_id("rd-no")
    await finished_in_error(sessions, writer, task_id, states)
    before = await rows(sessions, task_id)
    async with sessions() as s:
        outcome = await resubmit_task(s, accepted(task_id, "c2", Resubmission(of="c1", from_step=from_step)))
    assert outcome.status == "other_task" and outcome.why is not None and why in outcome.why
    assert await rows(sessions, task_id) == before


async def test_running_a_done_pivot_again_needs_force(sessions, writer) -> None:
    task_id = fresh_id("rd-pivot")
    states = {"reserve": StepState.PROCESSED, "charge": StepState.PROCESSED, "ship": StepState.ERROR}
    await finished_in_error(sessions, writer, task_id, states, pivot="charge")
    async with sessions() as s:
        refused = await resubmit_task(s, accepted(task_id, "c2", Resubmission(of="c1", from_step="charge"), "charge"))
    assert refused.status == "other_task" and refused.why is not None and "the pivot charge is done" in refused.why
    forced = Resubmission(of="c1", from_step="charge", force=True)
    async with sessions() as s:
        outcome = await resubmit_task(s, accepted(task_id, "c2", forced, "charge"))
    assert outcome.status == "resubmitted" and [k.name for k in outcome.kept or []] == ["reserve"]
