"""What the Temporal UI shows about a task: the workflow's static summary and details, each
activity's summary, and the Scheduler's current details.

Pure functions of the task's definition, input and status, used by every path that starts a
task (``sas submit``, Schedules, the Supervisor's clean-up) and by the Scheduler itself, so
the UI says the same thing whichever way a task began.

Text from outside sas (a service's error, a signal's note, the input's SKU and currency) goes
through ``markdown_text`` first, so it renders as itself and never as a link or a line of its own.

What they show, and what they never show (docs/security.md): the task id and type, the item
(quantity x SKU), the amount and currency, the step names, states, counts and error messages.
Never the card number, the customer id, the address or the callback URL. With the payload
codec on these texts are encrypted like any payload, but the UI shows them to everyone who
may use the codec server, so they stay free of secrets either way.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from sas.task_models import StepState, StepStatus, TaskState, TaskStatus
from sas.task_models.markdown import markdown_text
from sas.workflows.definitions import ChildTask, Parallel, Step, StepDefinition, TaskDefinition, Wait

# The UI truncates long summaries; keep them to one short line.
_MAX_SUMMARY = 200


def _amount(payload: Mapping[str, Any]) -> str | None:
    cents = payload.get("amount_cents")
    if not isinstance(cents, int) or isinstance(cents, bool):
        return None
    currency = payload.get("currency") if isinstance(payload.get("currency"), str) else "EUR"
    return f"{cents // 100}.{cents % 100:02d} {markdown_text(currency, 20)}"


def _items(payload: Mapping[str, Any]) -> str | None:
    quantity, sku = payload.get("quantity"), payload.get("sku")
    if not isinstance(quantity, int) or not isinstance(sku, str):
        return None
    return f"{quantity} × {markdown_text(sku, 80)}"


def task_summary(definition: TaskDefinition, task_id: str, payload: Mapping[str, Any]) -> str:
    """One line for the UI's workflow list: ``order o-123 · 2 × BOOK-1 · 25.98 EUR · reserve → charge → ship``."""
    parts = [f"{definition.task_type} {task_id}"]
    parts += [p for p in (_items(payload), _amount(payload)) if p]
    parts.append(_flow(definition))
    return " · ".join(parts)[:_MAX_SUMMARY]


def _flow(definition: TaskDefinition) -> str:
    """The stages in one line: ``reserve → (flight ‖ hotel) → charge``; the pivot (the point of no
    return) marked ``charge (pivot)``."""

    def named(step: Step) -> str:
        if isinstance(step, ChildTask):
            return f"{step.name} (child {step.task_type})"
        return f"{step.name} (pivot)" if step.name == definition.pivot else step.name

    return " → ".join(
        "(" + " ‖ ".join(named(s) for s in stage.steps) + ")" if isinstance(stage, Parallel) else named(stage)
        for stage in definition.stages
    )


def _kind(definition: TaskDefinition, step: Step) -> str:
    if isinstance(step, ChildTask):
        forward = " (forward only)" if definition.pivot_role(step.name) else ""
        return f"runs a child task of type `{step.task_type}`{forward}; undone by undoing the child"
    if isinstance(step, Wait):
        if step.signal is not None:
            return f"waits for `{step.signal}` (at most {step.deadline}; then {step.on_deadline})"
        return "waits until a time"
    role = definition.pivot_role(step.name)
    undo = f", undone by `{step.compensation}`" if step.compensation else ""
    if role == "pivot":
        return f"`{step.agent}` · **the pivot**: once attempted, the task only goes forward" + (
            f" (`{step.compensation}` only on a forced compensate)" if step.compensation else ""
        )
    if role == "forward_only":
        return f"`{step.agent}` · forward only: retried and parked, never undone" + (
            f" (`{step.compensation}` only on a forced compensate)" if step.compensation else ""
        )
    if step.read_only:
        return f"`{step.agent}` · read only: nothing to undo"
    if step.irreversible is not None:
        return f"`{step.agent}` · irreversible: {markdown_text(step.irreversible, 200)}"
    return f"`{step.agent}`{undo}"


def task_details(definition: TaskDefinition, task_id: str, payload: Mapping[str, Any]) -> str:
    """Markdown for the workflow page: what the task is, its steps and undos, and the commands that act on it."""
    # Lists, not tables: the UI's markdown view draws tables without borders or spacing.
    steps = "\n".join(
        f"{i + 1}. **{s.name}**: {_kind(definition, s)}"
        + (f" · in parallel (stage {stage + 1})" if stage is not None else "")
        + (f" · only if not: {s.when.unless}" if s.when is not None else "")
        for i, s in enumerate(definition.steps)
        for stage in [definition.stage_of(s.name)]
    )
    what = " · ".join(p for p in (_items(payload), _amount(payload)) if p) or "—"
    return (
        f"### {definition.task_type} `{task_id}`\n\n"
        f"**What:** {what}\n\n"
        f"{steps}\n\n"
        "If it cannot complete, the attempted steps are undone, latest first.\n\n"
        + (
            f"Past the pivot **{definition.pivot}** it only goes forward: a failing step is retried, then parked"
            f" for an operator; `sas compensate {task_id} --force --reason …` undoes it anyway.\n\n"
            if definition.pivot
            else ""
        )
        + f"Watch: `sas status {task_id}` · history: `sas show {task_id}` · "
        f"act: `sas retry {task_id}` or `sas compensate {task_id}`"
    )


def step_summary(
    step: str, agent: str, payload: Mapping[str, Any], *, run: int, failure_count: int, undo: bool = False
) -> str:
    """An Agent call's summary: ``charge 25.98 EUR · run 2 · FailureCount 1``.

    ``run`` is the Scheduler's own count of starts of this step (the Supervisor's re-runs);
    Temporal's quick retries of one run show as the activity's attempt beside it."""
    service, _, action = agent.partition(".")
    what = _amount(payload) if service == "payment" else _items(payload)
    verb = action or step
    label = f"{verb} (undo {step})" if undo else verb
    parts = [f"{label} {what}" if what else label, f"run {run}"]
    if failure_count:
        parts.append(f"FailureCount {failure_count}")
    return " · ".join(parts)[:_MAX_SUMMARY]


def _next_action(status: TaskStatus, waiting: StepStatus | None) -> str:
    task = status.task_id
    if status.state == TaskState.PROCESSED:
        return "nothing: the task completed"
    if status.state == TaskState.COMPENSATED:
        return f"nothing: the task was undone. To run it again: `sas resubmit {task}`"
    if status.state == TaskState.ERROR or status.needs_operator:
        return f"**an operator must decide**: `sas retry {task}` or `sas compensate {task}` (see `sas show {task}`)"
    waits = [s for s in status.steps if s.state == StepState.WAITING]
    if waits and waiting is None:
        return (
            "waiting: "
            + "; ".join(f"{s.name} {markdown_text(s.note or '', 120)}" for s in waits)
            + (f". Approve or reject with the signal, or the update `request_<signal>`: see `sas show {task}`")
        )
    if waiting is not None:
        return (
            f"waiting for a decision from the Supervisor, or an operator: `sas retry {task}` or `sas compensate {task}`"
        )
    if status.state == TaskState.COMPENSATING:
        return "undoing the attempted steps in reverse order"
    return "running: the Supervisor looks if a step fails or overruns its complete-by"


def current_details(status: TaskStatus) -> str:
    """The Scheduler's current details (markdown): state, step, FailureCount, last error, what to do next."""
    waiting_states = (StepState.FAILED, StepState.COMPENSATION_FAILED, StepState.ERROR)
    waiting = next((s for s in status.steps if s.state in waiting_states), None)
    failed = [s for s in status.steps if s.last_error]
    last = waiting or (failed[-1] if failed else None)
    current = next((s for s in status.steps if s.name == status.current_step), None)
    failure_count = max((s.failure_count for s in status.steps), default=0)
    lines = [
        f"**Task state: {status.state}**"
        + (" · needs an operator" if status.needs_operator else "")
        + f" · FailureCount {failure_count}"
    ]
    if current is not None and not status.state.terminal:
        lines.append(f"**Step:** {current.name} ({current.state}) · run {current.runs}")
    for waiting_step in (s for s in status.steps if s.state == StepState.WAITING):
        lines.append(f"**Waiting:** {waiting_step.name} {markdown_text(waiting_step.note or '', 300)}")
    if last is not None and last.last_error:
        lines.append(
            f"**Last error** ({last.name}, {markdown_text(last.error_type, 80)}): {markdown_text(last.last_error, 300)}"
        )
    lines.append(f"**Next:** {_next_action(status, waiting)}")
    steps = "\n".join(
        f"- **{s.name}**: {s.state} · run {s.runs} · FailureCount {s.failure_count}"
        + (f" · last error: {markdown_text(s.last_error, 80)}" if s.last_error else "")
        + (f" · {markdown_text(s.note, 120)}" if s.note and s.state in (StepState.SKIPPED, StepState.WAITING) else "")
        for s in status.steps
    )
    return "\n\n".join(lines) + "\n\n" + steps


def delayed_start(task_id: str, summary: str, details: str, starts_at: datetime) -> tuple[str, str]:
    """A delayed task's summary and details, saying first when it starts (UTC): until then
    Temporal holds the workflow and nothing of it runs, so these are all the UI can show (no
    current details yet). ``sas submit --in/--at`` sets them and ``sas reschedule`` sets them anew."""
    when = starts_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return (
        f"starts {when} · {summary}"[:_MAX_SUMMARY],
        f"**Delayed: starts {when}.** Nothing runs before. "
        f"Move it: `sas reschedule {task_id} --at <time>` · cancel it: `sas cancel {task_id}`\n\n{details}",
    )


def cleanup_summary(task_type: str, task_id: str, payload: Mapping[str, Any]) -> str:
    """The Supervisor's clean-up of a task whose workflow was closed from outside."""
    parts = [f"clean-up of {task_type} {task_id}"]
    parts += [p for p in (_items(payload), _amount(payload)) if p]
    parts.append("undo the attempted steps in reverse")
    return " · ".join(parts)[:_MAX_SUMMARY]


def cleanup_details(task_id: str, reason: str) -> str:
    """Markdown for the clean-up's workflow page: why the Supervisor started it."""
    return (
        f"### clean-up of `{task_id}`\n\n"
        "The task's Scheduler workflow was closed from outside (terminated, failed, timed out or cancelled). "
        "The Supervisor undoes, from the state store's record, every step that may have had an effect.\n\n"
        f"**Why:** {markdown_text(reason, 500)}\n\n"
        f"Watch: `sas show {task_id}`"
    )
