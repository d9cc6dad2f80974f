"""The Scheduler's state machine over a task's plan: step states, what may start now, and what
to undo in which order. Pure Python, like ``supervisor/decide/policy.py``: no I/O and nothing from
Temporal, so the Scheduler's rules are read and tested here, and the workflow shell
(``workflows/shell/``) only carries them out.

Every change of a step's status is made here: its state, note, result and wait in
:meth:`TaskCore.set`, its FailureCount in :meth:`TaskCore.claim_count` (never down) and
:meth:`TaskCore.reset_failures`, the task's need of an operator in :meth:`TaskCore.park`. The
shell never assigns a status field itself (``tests/scheduler/test_one_change_call.py``).

A plan is a list of *stages*. A stage is one step, or a parallel group whose steps start
together; the task goes on to the next stage when every step of the stage is done. A step
is *attempted* once the Scheduler has started it (``runs > 0``): only an attempted step can
have had an effect, so only attempted steps are undone, and a step never started is Skipped.
Undoing goes in the reverse order in which the steps completed; steps that were attempted
but never completed (failed, or cancelled in flight) are undone first, since they are the
latest work and their effect is not known.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, Literal

from sas.task_models import OperatorRequest, PivotRole, StepState, StepStatus, TaskState, TaskStatus

# A step in one of these states waits for a decision (the Supervisor's or an operator's).
DECISION_STATES = (StepState.FAILED, StepState.COMPENSATION_FAILED, StepState.ERROR)
RequestKind = Literal["retry", "compensate", "park", "complete", "skip"]


class Keep(Enum):
    """A field :meth:`TaskCore.set` leaves as it is (None is a value: it clears the field)."""

    KEEP = "keep"


KEEP = Keep.KEEP


@dataclass(frozen=True)
class PlanStep:
    """What the core needs to know of one planned step."""

    name: str
    position: int
    stage: int
    undo: bool = True  # has a compensation to call
    wait: bool = False  # a wait step: no Agent, no effect to undo
    signal: str | None = None  # what a wait step waits for: this signal (or its update); None: a time
    pivot: PivotRole | None = None  # the task type's point of no return, or a step after it
    skippable: bool = False  # an operator may skip it when it fails (StepDefinition.skippable)


@dataclass
class TaskCore:
    """A task's state: its status (what the ``status`` query answers), the order in which its
    steps completed, and the decisions queued for each step."""

    status: TaskStatus
    plan: list[PlanStep]
    completed: list[str] = field(default_factory=list)
    compensation: OperatorRequest | None = None
    queued: dict[str, list[tuple[RequestKind, OperatorRequest]]] = field(default_factory=dict)
    accepted: bool = False

    # ----------------------------------------------------------------- reading

    def step(self, name: str) -> StepStatus:
        return next(s for s in self.status.steps if s.name == name)

    def planned(self, name: str) -> PlanStep:
        return next(p for p in self.plan if p.name == name)

    def names(self) -> list[str]:
        return [s.name for s in self.status.steps]

    def stages(self) -> list[list[str]]:
        """The plan's stages in order, each the names of its steps in position order."""
        ordered = sorted(self.plan, key=lambda p: (p.stage, p.position))
        stages: list[list[str]] = []
        for previous, plan in zip([None, *ordered], ordered, strict=False):
            if previous is None or previous.stage != plan.stage:
                stages.append([])
            stages[-1].append(plan.name)
        return stages

    def waiting(self) -> list[StepStatus]:
        """The steps waiting for a decision, in position order."""
        return [s for s in self.status.steps if s.state in DECISION_STATES]

    @property
    def compensating(self) -> bool:
        return self.compensation is not None

    def undo_order(self) -> list[str]:
        """The attempted steps to undo, in order: those attempted but never completed first (latest
        position first), then the completed ones in the reverse order of their completion."""
        done = (StepState.COMPENSATED, StepState.SKIPPED)
        unfinished = [
            s.name
            for s in reversed(self.status.steps)
            if s.runs > 0 and s.name not in self.completed and s.state not in done
        ]
        return unfinished + [name for name in reversed(self.completed) if self.step(name).state not in done]

    def past_pivot(self) -> str | None:
        """Why the task is past its point of no return, or None while it may still be undone.

        Past it once a step after the pivot has run, or the pivot has been attempted with an
        outcome that may be its effect: done, running, or failed in a way that proves nothing
        (a timeout, a 5xx). The pivot refused for good (the service said no) did nothing, so the
        steps before it may still be undone."""
        pivot = next((p.name for p in self.plan if p.pivot == "pivot"), None)
        if pivot is None:
            return None
        after = [p.name for p in self.plan if p.pivot == "forward_only" and self.step(p.name).runs > 0]
        if after:
            return f"step {after[0]}, after the pivot {pivot}, has run"
        step = self.step(pivot)
        if step.runs == 0 or (step.permanent and step.state in DECISION_STATES):
            return None
        return f"the pivot {pivot} has been attempted ({step.state})"

    def never_started(self) -> list[StepStatus]:
        return [s for s in self.status.steps if s.runs == 0]

    # ---------------------------------------------------------------- changing

    def set(
        self,
        name: str,
        state: StepState | None = None,
        task_state: TaskState | None = None,
        *,
        note: str | Keep | None = KEEP,
        result: dict[str, Any] | Keep | None = KEEP,
        wait_until: datetime | Keep | None = KEEP,
        waits_for: str | Keep | None = KEEP,
    ) -> StepStatus:
        """The one place a step's status changes: its state (None: as it is), and its note,
        result and what it waits for (each left as it is unless given). A task state given
        with it becomes the task's, and the step its current step. Its FailureCount changes only
        through :meth:`claim_count` (up) and :meth:`reset_failures` (an operator's resubmit)."""
        step = self.step(name)
        if state is not None:
            step.state = state
            if state == StepState.PROCESSED and name not in self.completed:
                self.completed.append(name)
        if note is not KEEP:
            step.note = note
        if result is not KEEP:
            step.result = result
        if wait_until is not KEEP:
            step.wait_until = wait_until
        if waits_for is not KEEP:
            step.waits_for = waits_for
        if task_state is not None:
            self.status.state = task_state
            self.status.current_step = name
        return step

    def set_task(self, task_state: TaskState) -> None:
        self.status.state = task_state

    def forward_state(self) -> TaskState:
        """The task's state while it runs forward: Error or Failed while any step of it waits
        for an operator or a decision (another of its parallel group may still be running)."""
        states = {s.state for s in self.status.steps}
        if StepState.ERROR in states:
            return TaskState.ERROR
        if StepState.FAILED in states:
            return TaskState.FAILED
        return TaskState.PROCESSING

    def start(self, name: str, state: StepState = StepState.PROCESSING) -> StepStatus:
        """A run of the step begins (forward): counted, Processing (a wait step: Waiting)."""
        self.step(name).runs += 1
        self.step(name).state = state  # counted in forward_state below, as one of the running
        return self.set(name, state, self.forward_state())

    def done(self, name: str) -> TaskState:
        """The step completed: Processed. Returns the task's state now (Processed if it was the
        last one to complete)."""
        self.set(name, StepState.PROCESSED)
        if self.compensating:
            # An attempt that completed after undoing began (it was cancelled too late): the task
            # is being undone, with this step among the rest; it never reads Processed meanwhile.
            task_state = TaskState.COMPENSATING
        else:
            task_state = TaskState.PROCESSED if self.is_last(name) else self.forward_state()
        self.set(name, StepState.PROCESSED, task_state)
        return task_state

    def keep(self, name: str, state: StepState, result: dict[str, Any] | None) -> StepStatus:
        """A step a redrive keeps as the task's earlier incarnation left it: Processed (it ran
        there once, so the pivot's rule and the undo count it) or Skipped; never called again."""
        if state == StepState.PROCESSED:
            self.step(name).runs = max(self.step(name).runs, 1)
        return self.set(name, state, note="kept by a redrive", result=result)

    def skip(self, name: str, why: str) -> StepStatus:
        """A conditional step whose condition is false: never run, never undone."""
        return self.set(name, StepState.SKIPPED, note=why)

    def skip_by_operator(self, name: str, why: str) -> StepStatus:
        """A failed step an operator skipped (its type lets it be): Skipped, as a step whose
        condition was false, so its stage may end and its undo is never run (``undo_order``
        leaves Skipped steps out). Skipped rather than Processed, since it produced nothing
        and a Processed step is one whose effect a compensation undoes. The task goes forward
        again: Processing, unless another step of its stage still waits for a decision."""
        step = self.set(name, StepState.SKIPPED, note=why)
        self.set_task(self.forward_state())
        return step

    def record_failure(
        self, name: str, state: StepState, message: str, error_type: str, permanent: bool
    ) -> tuple[StepStatus, TaskState]:
        step = self.step(name)
        step.last_error, step.error_type, step.permanent = message, error_type, permanent
        task_state = TaskState.FAILED if state == StepState.FAILED else TaskState.COMPENSATING
        self.set(name, state, task_state)
        return step, task_state

    def stage_done(self, stage: Sequence[str]) -> bool:
        return all(self.step(n).state in (StepState.PROCESSED, StepState.SKIPPED) for n in stage)

    def is_last(self, name: str) -> bool:
        """Whether completing this step completes the task (the last stage, its other steps done)."""
        last = self.stages()[-1]
        return name in last and all(
            self.step(n).state in (StepState.PROCESSED, StepState.SKIPPED) for n in last if n != name
        )

    # ------------------------------------------------------------ decisions

    def queue(self, name: str, kind: RequestKind, request: OperatorRequest) -> None:
        self.queued.setdefault(name, []).append((kind, request))

    def next_request(self, name: str) -> tuple[RequestKind, OperatorRequest] | None:
        pending = self.queued.get(name)
        return pending.pop(0) if pending else None

    def has_request(self, name: str) -> bool:
        return bool(self.queued.get(name))

    def claim_count(self, name: str, request: OperatorRequest) -> None:
        """Take a decision's FailureCount as soon as it is queued, so that a second copy of it (two
        Supervisors flushing one outbox row) is recognised and refused."""
        if request.failure_count is not None:
            step = self.step(name)
            step.failure_count = max(step.failure_count, request.failure_count)  # never down

    def reset_failures(self, name: str) -> int:
        """An operator's resubmit starts the step's FailureCount again; returns the count it had."""
        step = self.step(name)
        before, step.failure_count = step.failure_count, 0
        return before

    def park(self, name: str) -> StepStatus:
        """The step waits as Error for an operator, and the task says it needs one."""
        self.status.needs_operator = True
        return self.set(name, StepState.ERROR, TaskState.ERROR)

    def operator_answered(self) -> None:
        """A decision arrived: the task no longer waits for an operator."""
        self.status.needs_operator = False

    def begin_compensation(self, request: OperatorRequest) -> None:
        """Compensation starts: the queued decisions no longer apply (each step's undo has its own)."""
        self.compensation = request
        self.queued.clear()

    def task_failure_count(self) -> int:
        return max((s.failure_count for s in self.status.steps), default=0)
