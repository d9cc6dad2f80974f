"""What the Temporal UI shows about a task: the workflow's static summary and details, each
activity's summary, and the Scheduler's current details.

Pure functions of the task's definition, input and status, used by every path that starts a
task (``sas submit``, Schedules, the Supervisor's clean-up) and by the Scheduler itself, so
the UI says the same thing whichever way a task began.

What a task is about is its type's to say: a ``TaskDefinition`` may declare its ``summary`` and
``details`` (sas/task_types/task_definition.py). Without them sas says only what it knows of every
type - the type, the id, the steps and their states - and invents nothing about the input.

Text from outside sas (a service's error, a signal's note, what a type's summary answers) goes
through ``markdown_text`` first, so it renders as itself and never as a link or a line of its own.

What they show (docs/security.md): the task id and type, the step names, states, counts and error
messages, and what the type declares; never an input field marked ``Secret``. With the payload
codec on these texts are encrypted like any payload, but the UI shows them to everyone who
may use the codec server, so a type's summary must stay free of secrets either way.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from sas.task_models import StepState, StepStatus, TaskState, TaskStatus
from sas.task_models.markdown import markdown_text
from sas.task_models.results import shown
from sas.workflows.definitions import (
    MAX_DETAILS,
    MAX_SUMMARY,
    ChildTask,
    Choice,
    ForEach,
    Parallel,
    Sequence,
    Step,
    StepContext,
    StepDefinition,
    TaskDefinition,
    Wait,
    leaves,
)

# The UI truncates long summaries; keep them to one short line.
_MAX_LINE = 200
# A type's details are paragraphs; this many at most, so a runaway answer stays a page.
_MAX_PARAGRAPHS = 30


def declared_summary(definition: TaskDefinition, payload: Mapping[str, Any]) -> str | None:
    """The type's own line for this input, as text; None if it declares none, or if it fails
    (a team's code must never fail a workflow task: sas's neutral text stands instead)."""
    given = definition.summary
    if given is None:
        return None
    values = shown(definition.input_model, dict(payload))
    try:
        text = given.format_map(values) if isinstance(given, str) else given(values)
    except Exception:  # noqa: BLE001 - a team's text, never worth failing the workflow task
        return None
    return markdown_text(text, MAX_SUMMARY) or None


def declared_details(
    definition: TaskDefinition, payload: Mapping[str, Any], results: Mapping[str, Mapping[str, Any]]
) -> str | None:
    """The type's own story of the task so far, each line a paragraph of text; None if it
    declares none or it fails. ``results`` are the steps' shown results (no secret fields)."""
    if definition.details is None:
        return None
    context = StepContext(input=shown(definition.input_model, dict(payload)), results=results)
    try:
        text = definition.details(context)
    except Exception:  # noqa: BLE001 - a team's text, never worth failing the workflow task
        return None
    lines = [markdown_text(line) for line in str(text)[:MAX_DETAILS].splitlines()]
    return "\n\n".join([line for line in lines if line][:_MAX_PARAGRAPHS]) or None


def task_summary(definition: TaskDefinition, task_id: str, payload: Mapping[str, Any]) -> str:
    """One line for the UI's workflow list: ``order o-123 · 2 × BOOK-1 · 25.98 EUR · reserve → charge → ship``,
    the middle the type's declared summary (without one: ``order o-123 · reserve → charge → ship``)."""
    parts = [f"{definition.task_type} {task_id}", declared_summary(definition, payload), _flow(definition)]
    return " · ".join(p for p in parts if p)[:_MAX_LINE]


def task_story(
    definition: TaskDefinition,
    task_id: str,
    payload: Mapping[str, Any],
    results: Mapping[str, Mapping[str, Any]] | None = None,
) -> str:
    """Markdown: what the task is (its type, id and steps) and what its type says of it: its
    summary, and with the ``results`` so far (the current details, not the static ones, which
    would keep saying what was true at the start) its declared details."""
    what = declared_summary(definition, payload)
    told = None if results is None else declared_details(definition, payload, results)
    return "\n\n".join(
        p
        for p in (
            f"### {definition.task_type} `{task_id}`",
            f"**What:** {what}" if what else None,
            told,
            f"**Steps:** {_flow(definition)}",
        )
        if p
    )


def _flow(definition: TaskDefinition) -> str:
    """The stages in one line: ``reserve → (flight ‖ hotel) → charge``; a branch of a group in
    brackets, ``([flight → seat] ‖ hotel) → charge``; the pivot (the point of no return) marked
    ``charge (pivot)``."""

    def drawn(member: StepDefinition | Wait | ChildTask | Sequence | Parallel | Choice) -> str:
        if isinstance(member, Choice):
            return "(" + " | ".join(drawn(path) for _, path in member.paths) + ")"
        if isinstance(member, Parallel):
            return "(" + " ‖ ".join(drawn(m) for m in member.steps) + ")"
        if isinstance(member, Sequence):
            inner = " → ".join(drawn(m) for m in member.steps)
            return f"[{inner}]" if len(member.steps) > 1 else inner
        if isinstance(member, ChildTask):
            return f"{member.name} (child {member.task_type})"
        if isinstance(member, ForEach):
            return f"{member.name} (for each)"
        return f"{member.name} (pivot)" if member.name == definition.pivot else member.name

    return " → ".join(drawn(stage) for stage in definition.stages)


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
    if isinstance(step, ForEach):
        return (
            f"for each item: `{step.agent}`{undo} · {step.max_concurrency} at once, batches of {step.batch_size},"
            f" {step.tolerate.describe()} may fail (then undone; past it, the task is undone)"
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
        + (f" · in its branch after {', '.join(after)}" if after else "")
        + _condition(definition, s)
        for i, s in enumerate(definition.steps)
        for stage in [definition.stage_of(s.name)]
        for after in [_in_branch_after(definition, s.name)]
    )
    return (
        f"{task_story(definition, task_id, payload)}\n\n"
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


def _condition(definition: TaskDefinition, step: Step) -> str:
    """When a step runs, if not always: its path of a choice, or its own condition."""
    path = definition.choice_path(step.name)
    if path is not None:
        return f" · one path of a choice: {'when no option holds' if path.label == 'otherwise' else path.label}"
    return f" · only if not: {step.when.unless}" if step.when is not None else ""


def _in_branch_after(definition: TaskDefinition, name: str) -> list[str]:
    """The steps of its own group that a step in a branch waits for (none outside branches)."""
    if definition.stage_of(name) is None:
        return []
    group = {s.name for s in leaves(definition.stage_item(name))}
    return [s.name for s in definition.steps if s.name in group and s.name in definition.finished_before(name)]


def step_summary(
    step: str, agent: str, payload: Mapping[str, Any], *, run: int, failure_count: int, undo: bool = False
) -> str:
    """An Agent call's summary: ``charge · run 2 · FailureCount 1``.

    ``run`` is the Scheduler's own count of starts of this step (the Supervisor's re-runs);
    Temporal's quick retries of one run show as the activity's attempt beside it. ``payload``
    is not read: what the task is about is its type's to say, in the task's summary and current
    details, and sas has no word of its own for what one Agent's call carries."""
    _, _, action = agent.rpartition(".")
    verb = action or step
    parts = [f"{verb} (undo {step})" if undo else verb, f"run {run}"]
    if failure_count:
        parts.append(f"FailureCount {failure_count}")
    return " · ".join(parts)[:_MAX_LINE]


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


def current_details(status: TaskStatus, story: str = "") -> str:
    """The Scheduler's current details (markdown): the task's ``story`` (``task_story``), then its
    state, step, FailureCount, last error and what to do next."""
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
    return "\n\n".join([story, *lines] if story else lines) + "\n\n" + steps


def delayed_start(task_id: str, summary: str, details: str, starts_at: datetime) -> tuple[str, str]:
    """A delayed task's summary and details, saying first when it starts (UTC): until then
    Temporal holds the workflow and nothing of it runs, so these are all the UI can show (no
    current details yet). ``sas submit --in/--at`` sets them and ``sas reschedule`` sets them anew."""
    when = starts_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return (
        f"starts {when} · {summary}"[:_MAX_LINE],
        f"**Delayed: starts {when}.** Nothing runs before. "
        f"Move it: `sas reschedule {task_id} --at <time>` · cancel it: `sas cancel {task_id}`\n\n{details}",
    )


def cleanup_summary(
    task_type: str, task_id: str, payload: Mapping[str, Any], definition: TaskDefinition | None = None
) -> str:
    """The Supervisor's clean-up of a task whose workflow was closed from outside; with the task
    type's ``definition`` (when this process knows it), its declared summary too."""
    what = declared_summary(definition, payload) if definition is not None else None
    parts = [f"clean-up of {task_type} {task_id}", what, "undo the attempted steps in reverse"]
    return " · ".join(p for p in parts if p)[:_MAX_LINE]


def cleanup_details(task_id: str, reason: str) -> str:
    """Markdown for the clean-up's workflow page: why the Supervisor started it."""
    return (
        f"### clean-up of `{task_id}`\n\n"
        "The task's Scheduler workflow was closed from outside (terminated, failed, timed out or cancelled). "
        "The Supervisor undoes, from the state store's record, every step that may have had an effect.\n\n"
        f"**Why:** {markdown_text(reason, 500)}\n\n"
        f"Watch: `sas show {task_id}`"
    )
