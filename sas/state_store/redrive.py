"""`sas redrive`: what the next incarnation of a task finished in Error keeps of the one before.

A redrive runs the task again from one step. The steps of every stage before that step's are
kept as the finished incarnation left them: Processed (with the result the state store holds)
or Skipped. They are not called again; the steps after them read their results, and an undo
names them, under the idempotency keys their effects were made with.

The step redriven from, and every step after it, runs again. Each keeps its old idempotency key
too, unless it was undone or never started: a call that may have landed (its answer lost when
the run was closed) is sent again under the key its service knows, so the service answers what
it did rather than doing it twice; a step that was undone, or never ran, gets its new
incarnation's key, so nothing it does is mistaken for the effect that was undone.

Decided here, under the task row's lock, from the rows as they are now; the client checks the
same beforehand (``sas.client.redrive``) only to refuse early and clearly.
"""

from __future__ import annotations

from collections.abc import Sequence

from sas.state_store.rows import StepRow
from sas.task_models import StepPlan, StepState, TaskAccepted, incarnation_key
from sas.task_models.plans import KeptStep

_KEPT = (str(StepState.PROCESSED), str(StepState.SKIPPED))
# Steps run again under a new key: nothing done under the old one stands (never run, or undone).
_FRESH_KEY = (str(StepState.PENDING), str(StepState.SKIPPED), str(StepState.COMPENSATED))


def stage(plan: StepPlan) -> int:
    """The step's stage, as the Scheduler's core orders them (a step alone is a stage at its position)."""
    return plan.position if plan.stage is None else plan.stage


def redrive(
    steps: Sequence[StepPlan], rows: Sequence[StepRow], from_step: str, incarnation: int, *, force: bool = False
) -> tuple[list[KeptStep], dict[str, str]] | str:
    """The kept steps and every step's idempotency key, or why the redrive cannot be done
    (``steps``: the plan the task type declares, in its first incarnation's keys)."""
    plans = {p.name: p for p in steps}
    by_name = {r.name: r for r in rows}
    start = plans.get(from_step)
    if start is None:
        return f"it has no step {from_step!r}"
    if not force and (ran := pivot_run_again(steps, rows, from_step)) is not None:
        return ran
    kept: list[KeptStep] = []
    keys: dict[str, str] = {}
    for plan in sorted(steps, key=lambda p: (stage(p), p.position)):
        row = by_name.get(plan.name)
        if row is None:
            return f"its step {plan.name} has no row in the state store"
        if stage(plan) < stage(start):
            if row.state not in _KEPT:
                return f"step {plan.name}, before {from_step}, is {row.state}: only Processed or Skipped steps are kept"
            kept.append(KeptStep(name=plan.name, state=StepState(row.state), result=row.result))
            keys[plan.name] = row.idempotency_key
        elif row.state in _FRESH_KEY:
            keys[plan.name] = incarnation_key(plan.idempotency_key, incarnation)
        else:
            keys[plan.name] = row.idempotency_key
    return kept, keys


def pivot_run_again(plans: Sequence[StepPlan], rows: Sequence[StepRow], from_step: str) -> str | None:
    """Why a redrive from ``from_step`` is refused without ``force``: it would run the task's
    pivot, its point of no return, again once the pivot is done; None if it would not."""
    by_plan = {p.name: p for p in plans}
    pivot = next((p for p in plans if p.pivot == "pivot"), None)
    done = {r.name for r in rows if r.state == str(StepState.PROCESSED)}
    if pivot is None or pivot.name not in done or stage(by_plan[from_step]) > stage(pivot):
        return None
    return f"the pivot {pivot.name} is done, and a redrive from {from_step} runs it again (--force, with a reason)"


def kept_by(
    accepted: TaskAccepted, rows: Sequence[StepRow], from_step: str
) -> tuple[list[KeptStep], dict[str, str]] | None:
    """What a redriven incarnation's rows say it kept, and every step's key; None if they do not
    hold a redrive from ``from_step``."""
    plans = {p.name: p for p in accepted.steps}
    start = plans.get(from_step)
    if start is None or {r.name for r in rows} != set(plans):
        return None
    kept = [
        KeptStep(name=r.name, state=StepState(r.state), result=r.result)
        for r in rows
        if stage(plans[r.name]) < stage(start) and r.state in _KEPT
    ]
    kept.sort(key=lambda k: (stage(plans[k.name]), plans[k.name].position))
    return kept, {r.name: r.idempotency_key for r in rows}
