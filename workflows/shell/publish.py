"""What the Temporal UI shows of a running task: the current details (the workflow page) and
the search attributes an operator filters on.

The current details are read only through Temporal's metadata query, so they are told when
asked (``Publisher.details``, which ``LiveDetails`` puts into that query's answer), from what
the last change published: telling them at every change, to be read perhaps never, was a
quarter of a Scheduler's CPU on the happy path (docs/benchmarks.md).

The current details tell the task's story - its type, id and steps, and what its type declares
of its input and results - whoever started it: a task started with ``temporal workflow start``
has no static summary or details, and these are then all the UI says of it."""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeKey

with workflow.unsafe.imports_passed_through():
    from sas.task_models import TaskState, TaskStatus
    from sas.task_models.search_attributes import CURRENT_STEP, FAILURE_COUNT, NEEDS_OPERATOR, TASK_STATE
    from sas.workflows.definitions import TaskDefinition
    from sas.workflows.summaries import current_details, task_story

# The current step alone moving on is not worth an upsert (each one is a history event and a
# visibility write): it is published with the next change of anything else.
_TRIGGERS = (TASK_STATE, FAILURE_COUNT, NEEDS_OPERATOR)
# A task in one of these states, with no failure counted and no operator needed, has nothing to
# look at: with ``progress`` off it is not published until that changes or it ends (after which
# every change is published, as before).
_UNDER_WAY = (TaskState.PENDING, TaskState.PROCESSING)


class Publisher:
    def __init__(self) -> None:
        self.search_attributes = False  # set once the plan says the namespace has them (sas setup)
        self.on = False  # nothing is published before the task is accepted
        # Whether a task that merely moves on is published (the plan's ``publish_progress``;
        # plans from before it existed say yes, so their histories replay with their upserts).
        self.progress = True
        self._published: dict[str, Any] = {}
        # What the current details are told from: the task's status (changed in place as the
        # task moves on) and input, once published.
        self._shown: tuple[TaskStatus, dict[str, Any]] | None = None
        # The story last told, and what it was told from: it changes only when a step's result
        # does, while the details change with every transition of the task.
        self._told: tuple[str, dict[str, Any], dict[str, Any], str] | None = None

    def publish(self, status: TaskStatus, payload: dict[str, Any]) -> None:
        """Keep the UI's view in step with the task (only what changed, to keep history small)."""
        if not self.on:
            return
        # Current details are no command and no event: told when asked (``details``), they
        # change nothing in history, and replay the same.
        self._shown = (status, payload)
        if not self.search_attributes:
            return
        wanted: dict[SearchAttributeKey[Any], Any] = {
            TASK_STATE: str(status.state),
            CURRENT_STEP: status.current_step or "",
            FAILURE_COUNT: max((s.failure_count for s in status.steps), default=0),
            NEEDS_OPERATOR: status.needs_operator,
        }
        if not self.progress and not self._published and self._nothing_to_look_at(wanted):
            return  # once published, every change is (an operator's reset must not leave a stale flag)
        if any(self._published.get(key.name) != wanted[key] for key in _TRIGGERS):
            changed = [key.value_set(value) for key, value in wanted.items() if self._published.get(key.name) != value]
            workflow.upsert_search_attributes(changed)
            self._published.update({key.name: value for key, value in wanted.items()})

    def details(self) -> str | None:
        """The current details (markdown) of the task as it stands; None before the task is
        accepted (nothing is published before)."""
        if self._shown is None:
            return None
        status, payload = self._shown
        return current_details(status, self._story(status, payload))

    def _story(self, status: TaskStatus, payload: dict[str, Any]) -> str:
        """The task's story, from its type's definition and its validated input; "" for a
        workflow that runs no task type (the clean-up: its static details say why it runs)."""
        instance = workflow.instance()
        definition = getattr(type(instance), "definition", None)
        if not isinstance(definition, TaskDefinition):
            return ""
        results = {s.name: s.result for s in status.steps if s.result is not None}
        told = self._told
        if told is not None and told[0] == status.task_id and told[1] == payload and told[2] == results:
            return told[3]
        story = task_story(definition, status.task_id, payload, results)
        self._told = (status.task_id, dict(payload), results, story)
        return story

    @staticmethod
    def _nothing_to_look_at(wanted: dict[SearchAttributeKey[Any], Any]) -> bool:
        return wanted[TASK_STATE] in _UNDER_WAY and wanted[FAILURE_COUNT] == 0 and not wanted[NEEDS_OPERATOR]
