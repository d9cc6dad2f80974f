"""Branches of a parallel group as plain Python: the core's undo order over any run of them
undoes what was attempted in every branch, unfinished attempts first, latest first within each
branch; the branch runner walks a group as declared (a branch in order, a group together, each
step given the results of the steps before it) and starts nothing once the task is compensating."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st

from sas.api import Parallel, Sequence, StepDefinition, TaskDefinition, Wait
from sas.task_models import OperatorRequest, StepState, StepStatus, TaskState, TaskStatus
from sas.workflows.core.machine import PlanStep, TaskCore
from sas.workflows.shell.branches import BranchRunner
from tests.scheduler.kinds import CHARGE, FLIGHT, HOTEL, TripAgents, TripInput


@st.composite
def branch_runs(draw: st.DrawFn) -> tuple[list[list[str]], TaskCore]:
    """A group of two to four branches, part-way through: each branch completed a prefix of its
    steps (the branches interleaved in some order), its next step pending, running or failed."""
    sizes = draw(st.lists(st.integers(1, 3), min_size=2, max_size=4))
    branches = [[f"b{b}s{s}" for s in range(size)] for b, size in enumerate(sizes)]
    names = [n for branch in branches for n in branch]
    plan = [PlanStep(n, position, 0) for position, n in enumerate(names)]
    status = TaskStatus(
        task_id="t",
        task_type="x",
        state=TaskState.PROCESSING,
        steps=[StepStatus(name=p.name, position=p.position, stage=0) for p in plan],
    )
    core = TaskCore(status, plan, accepted=True)
    progress = [draw(st.integers(0, len(branch))) for branch in branches]
    turns = draw(st.permutations([b for b, done in enumerate(progress) for _ in range(done)]))
    taken = [0] * len(branches)
    for b in turns:  # each branch completes its steps in its own order, the branches interleaved
        name = branches[b][taken[b]]
        core.start(name)
        core.done(name)
        taken[b] += 1
    for b, branch in enumerate(branches):
        if taken[b] < len(branch):
            fate = draw(st.sampled_from(["pending", "running", "failed"]))
            if fate != "pending":
                core.start(branch[taken[b]])
            if fate == "failed":
                core.record_failure(branch[taken[b]], StepState.FAILED, "no", "Refused", True)
    return branches, core


@given(branch_runs())
def test_every_branch_is_undone_latest_first_and_unfinished_attempts_before_completed_steps(
    run: tuple[list[list[str]], TaskCore],
) -> None:
    branches, core = run
    order = core.undo_order()
    attempted = [s.name for s in core.status.steps if s.runs > 0]
    assert sorted(order) == sorted(attempted)  # what was attempted, in every branch, and nothing else
    for branch in branches:
        mine = [n for n in order if n in branch]
        assert mine == [n for n in reversed(branch) if n in attempted]  # latest first within a branch
    unfinished = [n for n in order if n not in core.completed]
    assert order[: len(unfinished)] == unfinished
    assert order[len(unfinished) :] == list(reversed(core.completed))


def test_a_seat_refused_after_its_flight_undoes_the_seat_then_the_hotel_and_flight_latest_first() -> None:
    plan = [PlanStep("flight", 0, 0), PlanStep("seat", 1, 0), PlanStep("hotel", 2, 0), PlanStep("charge", 3, 3)]
    status = TaskStatus(
        task_id="t",
        task_type="x",
        state=TaskState.PROCESSING,
        steps=[StepStatus(name=p.name, position=p.position) for p in plan],
    )
    core = TaskCore(status, plan, accepted=True)
    for name in ("flight", "hotel"):
        core.start(name)
    core.done("flight")
    core.start("seat")
    core.done("hotel")
    core.record_failure("seat", StepState.FAILED, "no seat", "Refused", True)
    assert core.undo_order() == ["seat", "hotel", "flight"]
    assert [s.name for s in core.never_started()] == ["charge"]


SEAT = StepDefinition("seat", forward=TripAgents.book_flight, undo=TripAgents.cancel_flight)
MEAL = StepDefinition("meal", forward=TripAgents.book_hotel, undo=TripAgents.cancel_hotel)
LOUNGE = Wait("lounge", delay=timedelta(minutes=5))
# flight, then the seat and the meal side by side, then a wait - beside the hotel; then the charge.
BRANCHED = TaskDefinition(
    "branched", TripInput, (Parallel(Sequence(FLIGHT, Parallel(SEAT, MEAL), LOUNGE), HOTEL), CHARGE)
)


# Each step ends only once the steps named here have started or ended, so the branches
# interleave the same way on any machine: the flight is under way while the hotel starts, the
# seat while the meal starts, and the hotel ends last of the first steps.
INTERLEAVED: dict[str, list[tuple[str, str]]] = {
    "flight": [("hotel", "started")],
    "seat": [("meal", "started")],
    "hotel": [("seat", "ended"), ("meal", "ended")],
}


def _runner(
    calls: list[tuple[str, list[str]]],
    fail: str | None = None,
    after: dict[str, list[tuple[str, str]]] | None = None,
) -> tuple[TaskCore, BranchRunner]:
    names = [s.name for s in BRANCHED.steps]
    plan = [PlanStep(n, i, BRANCHED.stage_of(n) or i) for i, n in enumerate(names)]
    steps = [StepStatus(name=n, position=i) for i, n in enumerate(names)]
    core = TaskCore(TaskStatus(task_id="t", task_type="x", state=TaskState.PROCESSING, steps=steps), plan)
    seen = {(n, what): asyncio.Event() for n in names for what in ("started", "ended")}

    async def run_step(name: str, earlier: list[str]) -> None:
        calls.append((name, sorted(earlier)))
        core.start(name)
        seen[name, "started"].set()
        for other, what in (after or {}).get(name, []):
            try:
                await asyncio.wait_for(seen[other, what].wait(), timeout=10)
            except TimeoutError:
                raise AssertionError(f"{name} waited for {other} to have {what}; it never had") from None
        if name == fail:
            core.begin_compensation(OperatorRequest(by="test", reason=f"{name} refused for good"))
        else:
            core.done(name)
        seen[name, "ended"].set()

    async def wanted(names: list[str]) -> list[str]:
        return names

    return core, BranchRunner(core, run_step, wanted)


def test_a_group_runs_each_branch_in_order_beside_the_others_each_step_given_what_came_before_it() -> None:
    calls: list[tuple[str, list[str]]] = []
    core, runner = _runner(calls, after=INTERLEAVED)
    group = BRANCHED.stages[0]
    assert isinstance(group, Parallel) and group.branched
    asyncio.run(runner.run(group, ["before"]))
    started = [name for name, _ in calls]
    assert started[:2] == ["flight", "hotel"]  # the branches start together
    assert started.index("seat") > started.index("flight") and started.index("meal") > started.index("flight")
    assert started.index("lounge") > max(started.index("seat"), started.index("meal"))
    given = dict(calls)
    assert given["flight"] == given["hotel"] == ["before"]
    assert given["seat"] == given["meal"] == ["before", "flight"]  # not each other's: they run side by side
    assert given["lounge"] == ["before", "flight", "meal", "seat"]
    assert all(core.step(n).state == StepState.PROCESSED for n in ("flight", "seat", "meal", "lounge", "hotel"))


def test_nothing_new_starts_in_any_branch_once_the_task_is_compensating() -> None:
    calls: list[tuple[str, list[str]]] = []
    core, runner = _runner(calls, fail="seat", after=INTERLEAVED)
    group = BRANCHED.stages[0]
    assert isinstance(group, Parallel)
    asyncio.run(runner.run(group, []))
    assert sorted(name for name, _ in calls) == ["flight", "hotel", "meal", "seat"]  # no lounge
    assert [s.name for s in core.never_started()] == ["lounge", "charge"]
    assert core.undo_order() == ["seat", "hotel", "meal", "flight"]  # seat unfinished; then latest completed first


def test_a_settled_step_is_not_run_again_when_the_group_is_walked_anew() -> None:
    calls: list[tuple[str, list[str]]] = []
    core, runner = _runner(calls)
    for name in ("flight", "hotel"):
        core.start(name)
        core.done(name)
    core.skip("meal", "skipped: not hungry")
    group = BRANCHED.stages[0]
    assert isinstance(group, Parallel)
    asyncio.run(runner.run(group, []))
    assert [name for name, _ in calls] == ["seat", "lounge"]


def test_the_plan_keeps_the_group_as_one_stage_and_the_flow_shows_its_branches() -> None:
    from sas.workflows.summaries import task_details, task_summary

    assert {BRANCHED.stage_of(s.name) for s in BRANCHED.steps if s.name != "charge"} == {0}
    assert BRANCHED.stage_of("charge") is None
    assert task_summary(BRANCHED, "t", {}).endswith("([flight → (seat ‖ meal) → lounge] ‖ hotel) → charge")
    details = task_details(BRANCHED, "t", {})
    assert "**lounge**: waits until a time · in parallel (stage 1) · in its branch after flight, seat, meal" in details
    assert "**hotel**: `testinn.book`, undone by `testinn.cancel` · in parallel (stage 1)\n" in details
    assert BRANCHED.finished_before("lounge") == {"flight", "seat", "meal"}
    assert BRANCHED.finished_before("hotel") == set()
    assert BRANCHED.finished_before("charge") == {"flight", "seat", "meal", "lounge", "hotel"}
