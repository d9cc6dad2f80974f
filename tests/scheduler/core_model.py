"""A model of the Scheduler for the model-based test of its pure core (``test_core_model.py``).

``Run`` drives ``TaskCore`` and the request rules (``workflows/core/``) the way the workflow
shell does (``workflows/shell/``: forward.py, branches.py, waits.py, children.py, fanout.py,
decisions.py, operator.py, undo.py), one outside event at a time: an Agent's answer, a child's
end, an approval, a decision, the workflow cancelled. Between events it runs to where the
shell would wait again. Beside the core it keeps its own record of what happened - which
steps started, in which order they completed, which undo began when - and the test holds the
core's choices (undo order, the point of no return, what a request may do) against that
record, never against the core's own bookkeeping.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from hypothesis import strategies as st

from sas.task_models import OperatorRequest, PivotRole, StepState, StepStatus, TaskState, TaskStatus
from sas.task_models.fanout import FanOutItem, ItemOutcome
from sas.task_types.fan_out import Tolerance
from sas.workflows.core.children import outcome_of
from sas.workflows.core.fanout import FanOutTally
from sas.workflows.core.machine import PlanStep, TaskCore
from sas.workflows.core.requests import compensate_problem, park_problem, retry_problem, target_step

Kind = Literal["call", "wait_time", "wait_signal", "child", "fanout", "skipped"]
# The signal every wait step of the model waits for.
APPROVE = "approve"
# How a forward attempt of a call can end: its Agent's answer, or none.
CALL_ENDS = ("success", "transient", "permanent", "timeout", "lost_answer")
_FAILURES = {
    "transient": ("503 from the service", "RemoteUnavailable", False),
    "permanent": ("refused", "Refused", True),
    "timeout": ("complete-by passed", "Timeout", False),
    # The service did it, but its answer never came back: a failure that proves nothing.
    "lost_answer": ("connection reset after the request was sent", "RemoteUnavailable", False),
}


@dataclass(frozen=True)
class StepDef:
    """One declared step, as far as the core's inputs go."""

    name: str
    kind: Kind
    undo: bool = True  # a call with a compensation (a child, a fan-out: undone by their own means)
    deadline_undoes: bool = False  # a wait for a signal: no answer by its deadline undoes the task
    items: int = 0  # a fan-out's items
    tolerate: int = 0  # how many of them may fail
    pivot: PivotRole | None = None


@dataclass(frozen=True)
class Definition:
    """Stages in order; a stage is its branches, each a sequence of steps run in order (a single
    step: one branch of one step; a plain parallel group: branches of one step each)."""

    stages: tuple[tuple[tuple[StepDef, ...], ...], ...]

    def steps(self) -> list[StepDef]:
        return [s for stage in self.stages for branch in stage for s in branch]

    def step(self, name: str) -> StepDef:
        return next(s for s in self.steps() if s.name == name)

    def pivot(self) -> str | None:
        return next((s.name for s in self.steps() if s.pivot == "pivot"), None)


@st.composite
def definitions(draw: st.DrawFn) -> Definition:
    """Task types the definition checks accept (sas/task_types/checks.py): the pivot a call of a
    stage of its own, a fan-out a stage of its own before any pivot, no wait for a signal after
    the pivot (a rejection there would undo the task past its point of no return)."""
    count = draw(st.integers(1, 4))
    pivot_at = draw(st.none() | st.integers(0, count - 1))
    names = (f"s{i}" for i in range(100))
    stages: list[tuple[tuple[StepDef, ...], ...]] = []

    def one(role: PivotRole | None) -> StepDef:
        kinds: list[Kind] = ["call", "call", "wait_time", "child", "skipped"]
        if role is None:
            kinds.append("wait_signal")
        kind = draw(st.sampled_from(kinds))
        return StepDef(
            next(names),
            kind,
            undo=draw(st.booleans()) if kind == "call" else True,
            deadline_undoes=kind == "wait_signal" and draw(st.booleans()),
            pivot=role,
        )

    for index in range(count):
        role: PivotRole | None = None
        if pivot_at is not None and index >= pivot_at:
            role = "pivot" if index == pivot_at else "forward_only"
        if role == "pivot":
            stages.append(((StepDef(next(names), "call", undo=draw(st.booleans()), pivot="pivot"),),))
            continue
        shapes = ["one", "group", "branches"] + (["fanout"] if pivot_at is None or index < pivot_at else [])
        shape = draw(st.sampled_from(shapes))
        if shape == "fanout":
            items = draw(st.integers(1, 4))
            fan = StepDef(next(names), "fanout", items=items, tolerate=draw(st.integers(0, 2)))
            stages.append(((fan,),))
        elif shape == "one":
            stages.append(((one(role),),))
        else:
            width = draw(st.integers(2, 3))
            longest = 1 if shape == "group" else 2
            stages.append(tuple(tuple(one(role) for _ in range(draw(st.integers(1, longest)))) for _ in range(width)))
    return Definition(tuple(stages))


def core_of(definition: Definition) -> TaskCore:
    """The core as the shell builds it once the task is accepted (shell/acceptance.py)."""
    plan: list[PlanStep] = []
    position = 0
    for stage in definition.stages:
        first = position
        for branch in stage:
            for step in branch:
                plan.append(
                    PlanStep(
                        step.name,
                        position,
                        first,
                        undo=step.kind == "call" and step.undo,
                        wait=step.kind in ("wait_time", "wait_signal"),
                        signal=APPROVE if step.kind == "wait_signal" else None,
                        pivot=step.pivot,
                    )
                )
                position += 1
    status = TaskStatus(
        task_id="t",
        task_type="model",
        state=TaskState.PROCESSING,
        steps=[StepStatus(name=p.name, position=p.position, stage=p.stage) for p in plan],
    )
    return TaskCore(status, plan, accepted=True)


Phase = Literal["idle", "running", "deciding", "done", "stopped", "undoing", "undo_deciding", "undone"]
Event = tuple[str, ...]


@dataclass
class Record:
    """What happened, kept by the model beside the core."""

    started: list[str] = field(default_factory=list)  # first start of each step, in order
    completed: list[str] = field(default_factory=list)  # each forward completion, in order
    undo_began: list[str] = field(default_factory=list)  # each step's undo, as it began
    undone: list[str] = field(default_factory=list)  # each step's undo, as it ended
    pivot_end: str | None = None  # how the pivot's latest attempt ended (None: running)
    after_pivot_ran: bool = False
    compensation_began_past_pivot: bool = False
    must_undo: list[str] = field(default_factory=list)  # why the declaration says the task is undone
    fan_out_failed: dict[str, int] = field(default_factory=dict)


class Run:
    """One task's run, as the shell would carry it out over the core."""

    def __init__(self, definition: Definition) -> None:
        self.definition = definition
        self.core = core_of(definition)
        self.record = Record()
        self.phase: dict[str, Phase] = {s.name: "idle" for s in definition.steps()}
        self.tallies: dict[str, FanOutTally] = {}
        self.child_end: dict[str, TaskState | Literal["running"] | None] = {}
        self.stage = 0
        self.undo_plan: list[str] | None = None
        self.finished = False
        self._start_stage()

    # ----------------------------------------------------------- what can happen now

    def events(self) -> list[Event]:
        """The outside events that can happen now, in a stable order (so they shrink)."""
        if self.finished:
            return []
        core = self.core
        found: list[Event] = []
        for name, phase in self.phase.items():
            step = self.definition.step(name)
            if phase == "running":
                found += [("answer", name, end) for end in self._ends(step)]
                # Most answers are successes: undoing then has completed steps to order.
                found += [("answer", name, self._ends(step)[0])] * 4
            elif phase == "undoing":
                found += [("undo", name, end) for end in ("success", "failure")]
            elif phase == "stopped" and step.kind == "child" and self.child_end.get(name) == "running":
                found += [("child_ended", name, end) for end in ("Processed", "Compensated", "none")]
        if not core.compensating:
            found.append(("cancel",))
        found.append(("request",))
        return found

    def _ends(self, step: StepDef) -> tuple[str, ...]:
        if step.kind == "call":
            return CALL_ENDS
        if step.kind == "wait_time":
            return ("time",)
        if step.kind == "wait_signal":
            return ("approve", "reject", "deadline")
        if step.kind == "child":
            return ("Processed", "Compensated", "none")
        return ("items",)  # a fan-out: its items' answers are drawn as they come

    # ----------------------------------------------------------- forward

    def _start_stage(self) -> None:
        while not self.core.compensating and self.stage < len(self.definition.stages):
            for branch in self.definition.stages[self.stage]:
                self._next_in(branch)
            if not self._stage_over():
                return
            self.stage += 1
        if not self.core.compensating and self.stage == len(self.definition.stages):
            self.core.set_task(TaskState.PROCESSED)  # StepRunner.finish
            self.finished = True

    def _next_in(self, branch: tuple[StepDef, ...]) -> None:
        """Start the branch's next step once the one before it is done (shell/branches.py)."""
        for step in branch:
            if self.core.compensating:
                return
            phase = self.phase[step.name]
            if phase == "done":
                continue
            if phase == "idle":
                self._begin(step)
                if self.phase[step.name] == "done":
                    continue
            return

    def _stage_over(self) -> bool:
        return all(self.phase[s.name] == "done" for branch in self.definition.stages[self.stage] for s in branch)

    def _begin(self, step: StepDef) -> None:
        core = self.core
        if step.kind == "skipped":
            core.skip(step.name, "skipped: its condition is false")
            self.phase[step.name] = "done"
            return
        waits = step.kind in ("wait_time", "wait_signal", "child")
        core.start(step.name, StepState.WAITING if waits else StepState.PROCESSING)
        if step.name not in self.record.started:
            self.record.started.append(step.name)
        if step.pivot == "pivot":
            self.record.pivot_end = None
        elif step.pivot == "forward_only":
            self.record.after_pivot_ran = True
        if step.kind == "fanout":
            self.tallies[step.name] = FanOutTally(total=step.items, tolerance=Tolerance(count=step.tolerate))
        if step.kind == "child":
            self.child_end[step.name] = "running"
        self.phase[step.name] = "running"

    def _done(self, name: str) -> None:
        self.core.done(name)
        self.record.completed.append(name)
        self.phase[name] = "done"

    def _fail(self, name: str, message: str, error_type: str, permanent: bool) -> None:
        self.core.record_failure(name, StepState.FAILED, message, error_type, permanent)
        self.phase[name] = "deciding"
        if self.definition.step(name).pivot == "pivot":
            self.record.pivot_end = "permanent" if permanent else "transient"

    def answer(self, name: str, end: str, items: list[str] | None = None) -> None:
        """A forward attempt ended (``items``: a fan-out's items' answers, one per item)."""
        step = self.definition.step(name)
        if self.core.compensating:
            # Undoing has begun: the attempt was cancelled; one that completed anyway is done
            # (shell/forward.py waits for a cancelled attempt); otherwise it is undone unfinished.
            if step.kind == "fanout":
                self._take_items(name, items or [])
                self.phase[name] = "stopped"
            elif step.kind == "child":
                self.child_end[name] = self._child_state(end)
                self.phase[name] = "stopped"
            elif step.kind == "call" and end == "success":
                self._done(name)
            else:
                self.phase[name] = "stopped"
            return
        if step.pivot == "pivot" and end == "success":
            self.record.pivot_end = "success"
        if step.kind == "call":
            if end == "success":
                self._done(name)
            else:
                self._fail(name, *_FAILURES[end])
        elif step.kind == "wait_time" or (step.kind == "wait_signal" and end == "approve"):
            self._done(name)
        elif step.kind == "wait_signal":
            if end == "deadline" and not step.deadline_undoes:
                self._done(name)
            else:
                self.record.must_undo.append(f"{name}: {end}")
                self.phase[name] = "stopped"
                self._compensate(OperatorRequest(by="deadline" if end == "deadline" else "bob", reason=end))
        elif step.kind == "child":
            state = self._child_state(end)
            self.child_end[name] = state
            outcome = outcome_of(f"t:{name}", state)
            if outcome.kind == "done":
                self._done(name)
            else:
                self._fail(name, outcome.message, outcome.error_type, outcome.permanent)
        else:
            self._fan_out(name, step, items or [])

    @staticmethod
    def _child_state(end: str) -> TaskState | None:
        return {"Processed": TaskState.PROCESSED, "Compensated": TaskState.COMPENSATED}.get(end)

    def _take_items(self, name: str, items: list[str]) -> None:
        items = [i if i != "undo_fails" else "failed" for i in items]
        tally = self.tallies[name]
        keys = [f"{name}-{i}" for i in range(len(items))]
        tally.begin([FanOutItem(key=k, item={}) for k in keys])
        tally.take([ItemOutcome(key=k, state=s) for k, s in zip(keys, items, strict=True)])  # type: ignore[arg-type]

    def _fan_out(self, name: str, step: StepDef, items: list[str]) -> None:
        """Its items answered (shell/fanout.py): within the tolerance the failed ones are undone
        and the task goes on; past it the step fails for good and the task is undone."""
        self._take_items(name, items)
        tally = self.tallies[name]
        failed = items.count("failed") + items.count("undo_fails")
        self.record.fan_out_failed[name] = failed
        if failed > step.tolerate or "undo_fails" in items:
            # Past its tolerance, or a failed item left done: the declaration says undo the task.
            self.record.must_undo.append(f"{name}: {failed} of {step.items} items failed")
        if not tally.past_tolerance():
            keys = tally.to_undo(tally.failed())
            undid = [
                "compensation_failed" if items[int(k.rsplit("-", 1)[1])] == "undo_fails" else "compensated"
                for k in keys
            ]
            tally.take([ItemOutcome(key=k, state=s) for k, s in zip(keys, undid, strict=True)])  # type: ignore[arg-type]
        if tally.past_tolerance() or tally.count("compensation_failed"):
            self.core.record_failure(name, StepState.FAILED, "past its tolerance", "FanOutPastTolerance", True)
            self.phase[name] = "stopped"
            self._compensate(OperatorRequest(by="sas", reason=f"{name}: past its tolerance"))
            return
        self._done(name)

    # ----------------------------------------------------------- decisions

    def request(self, kind: str, request: OperatorRequest) -> str | None:
        """A signal from the Supervisor or an operator (shell/operator.py); why it was ignored."""
        core = self.core
        if kind == "retry":
            problem = retry_problem(core, request)
            if problem:
                self._note_overrun(request)
                return problem
            self._queue("retry", request, undo=core.compensating)
        elif kind == "park":
            problem = park_problem(core, request)
            if problem:
                return problem
            self._queue("park", request)
        else:
            problem = compensate_problem(core, request)
            if problem:
                return problem
            if request.failure_count is not None and request.step in core.names():
                core.claim_count(request.step, request)
            if core.compensating:
                self._queue("compensate", request, undo=True)
            else:
                self.record.must_undo.append(f"compensate from {request.by}")
                self._compensate(request)
        return None

    def _note_overrun(self, request: OperatorRequest) -> None:
        core = self.core
        if request.failure_count is None or request.step not in core.names():
            return
        step = core.step(request.step)
        running = (StepState.PROCESSING, StepState.COMPENSATING)
        if step.state not in running and request.failure_count > step.failure_count:
            return
        core.claim_count(request.step, request)

    def _queue(
        self, kind: Literal["retry", "compensate", "park"], request: OperatorRequest, undo: bool = False
    ) -> None:
        target = target_step(self.core, request.step, undo=undo)
        self.core.claim_count(target.name, request)
        self.core.queue(target.name, kind, request)

    def cancel(self) -> str | None:
        """The workflow is cancelled (UI, CLI): undone, unless past the point of no return."""
        past = self.core.past_pivot()
        if past is not None:
            return past
        # The attempts under way end with the cancellation; a child runs on until it is undone.
        for name, phase in self.phase.items():
            if phase == "running":
                self.phase[name] = "stopped"
        self.record.must_undo.append("workflow cancelled")
        self._compensate(OperatorRequest(by="temporal", reason="workflow cancelled"))
        return None

    def _compensate(self, request: OperatorRequest) -> None:
        if not self.core.compensating:
            self.record.compensation_began_past_pivot = self.past_pivot()
            self.core.begin_compensation(request)

    def past_pivot(self) -> bool:
        """The model's own point of no return: a step after the pivot has run, or the pivot has
        been attempted and its latest attempt did not end in a refusal it still waits on."""
        pivot = self.definition.pivot()
        if pivot is None or pivot not in self.record.started:
            return self.record.after_pivot_ran
        refused = self.record.pivot_end == "permanent" and self.phase[pivot] == "deciding"
        return self.record.after_pivot_ran or not refused

    # ----------------------------------------------------------- settling

    def settle(self) -> None:
        """Run on until the shell would wait for an outside event again."""
        while not self.finished and self._one_move():
            pass

    def _one_move(self) -> bool:
        core = self.core
        for name, phase in self.phase.items():
            if phase == "deciding":
                if core.has_request(name):
                    self._decide(name, undo=False)
                    return True
                if core.compensating:
                    self.phase[name] = "stopped"
                    return True
            elif phase == "undo_deciding" and core.has_request(name):
                self._decide(name, undo=True)
                return True
        if not core.compensating:
            if self.stage < len(self.definition.stages):
                before = dict(self.phase)
                for branch in self.definition.stages[self.stage]:
                    self._next_in(branch)
                if self._stage_over():
                    self.stage += 1
                    self._start_stage()
                    return True
                return before != self.phase
            return False
        if any(p in ("running", "deciding") for p in self.phase.values()):
            return False  # the forward run has not ended yet
        if self.undo_plan is None:
            self._begin_undo()
            return True
        return self._undo_next()

    def _decide(self, name: str, *, undo: bool) -> None:
        """Decisions.wait_for: take the step's next decision."""
        core = self.core
        queued = core.next_request(name)
        assert queued is not None
        kind, request = queued
        step = core.step(name)
        if request.failure_count is not None:
            step.failure_count = max(step.failure_count, request.failure_count)
        if kind == "park":
            core.status.needs_operator = True
            core.set(name, StepState.ERROR, TaskState.ERROR)
            return
        core.status.needs_operator = False
        if undo:
            self._start_undo(name)
            return
        definition = self.definition.step(name)
        self.phase[name] = "idle"
        self._begin(definition)

    def _begin_undo(self) -> None:
        """Undo.all_attempted: the steps never started are Skipped, then the order is the core's."""
        core = self.core
        core.set_task(TaskState.COMPENSATING)
        for step in core.never_started():
            if step.state != StepState.SKIPPED:
                core.set(step.name, StepState.SKIPPED)
        self.undo_plan = core.undo_order()

    def _undo_next(self) -> bool:
        assert self.undo_plan is not None
        for name in self.undo_plan:
            phase = self.phase[name]
            if phase == "undone":
                continue
            if phase in ("undoing", "undo_deciding"):
                return False
            step = self.definition.step(name)
            if step.kind == "child" and self.child_end.get(name) == "running":
                return False  # cancelled, it undoes itself (or completes first): waited for
            self.record.undo_began.append(name)
            self._start_undo(name)
            return True
        self.core.set_task(TaskState.COMPENSATED)
        self.finished = True
        return True

    def _start_undo(self, name: str) -> None:
        core = self.core
        step = self.definition.step(name)
        if step.kind == "child" and self.child_end.get(name) != TaskState.PROCESSED:
            core.set(name, StepState.COMPENSATED)  # it undid itself, or ended without a result
            self._undone(name)
            return
        if (step.kind == "call" and not step.undo) or step.kind in ("wait_time", "wait_signal"):
            # No Agent to call (shell/undo.py): a wait interrupted while it waited had no effect.
            if name in core.completed or not core.planned(name).wait:
                core.set(name, StepState.COMPENSATED)
            else:
                core.skip(name, "the task was undone while it waited")
            self._undone(name)
            return
        core.set(name, StepState.COMPENSATING, TaskState.COMPENSATING)
        self.phase[name] = "undoing"

    def undo(self, name: str, end: str, items: list[str] | None = None) -> None:
        """An undo's answer (a fan-out's: one for each item still to undo)."""
        core = self.core
        if self.definition.step(name).kind == "fanout":
            tally = self.tallies[name]
            keys = tally.to_undo()
            states = items or ["compensated"] * len(keys)
            tally.take([ItemOutcome(key=k, state=s) for k, s in zip(keys, states, strict=True)])  # type: ignore[arg-type]
            end = "failure" if tally.count("compensation_failed") else "success"
        if end == "success":
            core.set(name, StepState.COMPENSATED)
            self._undone(name)
            return
        core.record_failure(name, StepState.COMPENSATION_FAILED, "undo refused", "Refused", False)
        self.phase[name] = "undo_deciding"

    def _undone(self, name: str) -> None:
        self.record.undone.append(name)
        self.phase[name] = "undone"

    def child_ended(self, name: str, end: str) -> None:
        self.child_end[name] = self._child_state(end)
