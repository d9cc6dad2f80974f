"""``TaskClient``: everything the ``sas`` command line does with a task, for a team's own code.

It starts a task the one right way (the id is the task, never reused; the deployment's task
queue; the UI's summary; the pydantic and, when keys are set, encrypting data converter) and
takes every operator action, each with who asked and why in the audit log. The command line is
a thin layer over it, so a service and an operator at a terminal do exactly the same thing.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from sas.client import inputs
from sas.client.core import typed
from sas.client.errors import InvalidInput, NotApplicable, TaskNotFound
from sas.client.read_calls import ReadCalls
from sas.client.repair_calls import RepairCalls
from sas.client.results import ActionResult, BulkResult, Submitted
from sas.client.schedule_calls import ScheduleCalls
from sas.client.selection import DEFAULT_CONCURRENCY, Action, Result, Selected, Selection
from sas.client.upkeep_calls import UpkeepCalls

# Only what a read of the state store needs is imported here: `sas show`, `list` and `alerts`
# go through this client and load nothing of Temporal's SDK or the task types (they start fast).
if TYPE_CHECKING:
    from pydantic import BaseModel

    from sas.client.status import TaskView
    from sas.client.waiting import Outcome
    from sas.settings import Settings
    from sas.task_models import TaskResult


class TaskClient(ReadCalls, RepairCalls, ScheduleCalls, UpkeepCalls):
    """Start tasks and act on them as an operator, from code.

    Build it with ``await TaskClient.connect()`` (the SAS_* settings, or ``settings``), or over
    a Temporal client you already have: ``TaskClient(client, settings)``; that client must use
    sas's data converter (``sas.runtime.connect.connect`` builds one). ``actor`` is who acts
    when a call does not say (``by=``): name your service, so the audit log does. ``team``
    limits it to one team's tasks (``connect``).

    Its parts, by concern: starting and following a task and the operator actions (here), the
    repairs (``complete_step``, ``retry_with_input``, ``skip_step``), the
    reads (``show``, ``list``, ``alerts``, ``services``, ``incidents``), the schedules
    (``create_schedule``, ``schedules``, ``pause_schedule``...) and the stack's upkeep
    (``reconcile``, ``health``).

    Every failure a caller can act on is a ``ClientError`` (``sas.api.client``): ``InvalidInput``,
    ``TaskNotFound``, ``TaskIdTaken``, ``NotApplicable``, ``NotConfirmed``, ``Unreachable``,
    ``Unhealthy``.
    """

    @classmethod
    @typed
    async def connect(
        cls,
        settings: Settings | None = None,
        *,
        actor: str | None = None,
        lazy: bool = False,
        team: str | None = None,
    ) -> TaskClient:
        """A client on the Temporal and state store that ``settings`` (default: SAS_*) name.

        ``lazy``: connect to Temporal when a call first needs it, not now; a call that reads
        only the state store (``list``, ``show`` of an accepted task, ``alerts``, ``incidents``,
        ``services``) then works while Temporal is away.

        ``team``: act for that team only (default ``SAS_OPERATOR__TEAM``): an action on, or a
        ``show`` of, a task whose type is not the team's raises ``OutsideTeam`` before anything
        is sent; ``submit`` and ``create_schedule`` take the team's types only; a bulk action
        keeps the team's selected tasks; ``list``, ``alerts``, ``incidents`` and ``schedules``
        show the team's; forcing a breaker (a service is every team's) is refused; and each
        audit entry's ``by`` names the team (``alice (team payments)``)."""
        if settings is None:
            from sas.settings import get_settings

            settings = get_settings()
        made = cls(None, settings, actor=actor, team=team)
        if not lazy:
            await made._temporal()
        return made

    # ------------------------------------------------------------ starting and following

    @typed
    async def submit(
        self,
        task_type: str,
        task_input: BaseModel | Mapping[str, Any],
        *,
        task_id: str | None = None,
        delay: timedelta | datetime | None = None,
        priority: int | None = None,
    ) -> Submitted:
        """Start a task of ``task_type`` with ``task_input`` (its input model, or a dict it validates).

        ``task_id`` defaults to ``<type>-<random>``; an id already used raises ``TaskIdTaken``
        (a task id is one task, forever). ``delay``: start after this long, or at this time
        (at most 366 days ahead). ``priority``: 1 (most urgent) to 5; default 3, and kept by a
        ``reschedule`` and a ``resubmit`` (every start is ``sas.client.submitting.start_task``)."""
        inputs.definition(task_type)
        self._for_team(task_type)
        payload = inputs.validate_input(task_type, task_input, self.settings.outbound)
        task_id = inputs.check_task_id(task_id) if task_id else inputs.new_task_id(task_type)
        if isinstance(delay, datetime):
            when = delay if delay.tzinfo is not None else delay.astimezone()
            delay = when - datetime.now(UTC)
        start_delay = inputs.check_delay(delay)
        urgency = inputs.check_priority(priority)
        from sas.client import submitting

        temporal = await self._temporal()
        started = await submitting.start(
            temporal,
            self.settings.temporal.task_queue,
            task_type,
            task_id,
            payload,
            start_delay=start_delay,
            priority=urgency,
            teams=self.settings.teams,  # the client's own settings, not this process's environment
        )
        if not started:
            raise await submitting.existing_task(temporal, self.store, task_id)
        starts_at = datetime.now(UTC) + start_delay if start_delay else None
        return Submitted(task_id, task_type, starts_at)

    @typed
    async def status(self, task_id: str) -> TaskView:
        """Where the task stands now: its steps, states and FailureCounts (``TaskView``), a
        running fan-out's items counted as its batches have ended them so far; a delayed task's
        start (``source`` ``delayed``). ``TaskNotFound`` if nothing knows it."""
        from sas.client import status
        from sas.client.status import TaskView

        inputs.check_task_id(task_id)
        self.store.require()  # no state store here is said before Temporal is asked
        temporal = await self._temporal()
        found = await status.fetch_status(temporal, self.store, task_id)
        if found is not None and found.get("source") == "scheduler":
            await status.add_running_items(temporal, task_id, found["steps"])
        if found is not None:
            return TaskView.of(found.get("source", "scheduler"), found)
        later = await status.scheduled(temporal, task_id)
        if later is not None:
            return TaskView.of("delayed", later)
        raise TaskNotFound(f"no task {task_id!r}", "check the id with `sas list`")

    @typed
    async def wait(self, task_id: str) -> Outcome:
        """Wait until the task ends (Processed, Compensated, or its workflow failed or was
        closed) or waits for an operator; ``Outcome.state`` says which."""
        from sas.client import waiting

        inputs.check_task_id(task_id)
        return await waiting.wait_for_outcome(await self._temporal(), task_id)

    @typed
    async def result(self, task_id: str) -> TaskResult:
        """Wait for the task's result (Processed or Compensated, with its steps). A workflow that
        failed or was closed from outside raises ``NotApplicable`` saying how it ended."""
        from temporalio.client import WorkflowFailureError

        from sas.task_models import TaskResult

        inputs.check_task_id(task_id)
        try:
            return await (await self._temporal()).get_workflow_handle(task_id, result_type=TaskResult).result()
        except WorkflowFailureError as err:
            cause = err.cause
            why = " ".join(str(getattr(cause, "message", None) or cause or err).split())
            raise NotApplicable(f"{task_id} ended without a result: {why}", f"see `sas show {task_id}`") from None

    # ------------------------------------------------------------ operator actions

    @typed
    async def retry(
        self, task_id: str, *, step: str | None = None, by: str | None = None, reason: str = ""
    ) -> ActionResult:
        """Re-run the step that waits for a decision (``step``: that one), or resume one parked."""
        from sas.client import operator

        inputs.check_task_id(task_id)
        who = await self._acting_on(task_id, by, reason)
        temporal = await self._temporal()
        return ActionResult(task_id, await operator.retry(temporal, self.store, task_id, step, who, reason))

    @typed
    async def compensate(
        self, task_id: str, *, by: str | None = None, reason: str = "", force: bool = False
    ) -> ActionResult:
        """Undo the task's completed steps, in reverse order. ``force``: past a pivot step too
        (needs a reason; refused by a sas without forced compensation)."""
        from sas.client import operator

        inputs.check_task_id(task_id)
        who = await self._acting_on(task_id, by, reason)
        temporal = await self._temporal()
        return ActionResult(task_id, await operator.compensate(temporal, task_id, who, reason, force=force))

    @typed
    async def park(
        self,
        task_id: str,
        *,
        step: str | None = None,
        by: str | None = None,
        reason: str = "",
        confirm_within_s: float = 30.0,
    ) -> ActionResult:
        """Park the task's running or waiting step as Error until ``retry`` (a hung call too).

        Returns once Temporal shows the pause, or the Scheduler has mirrored the step as Error;
        ``NotConfirmed`` after ``confirm_within_s`` (0 < s <= 600) if neither does by then (the
        park may still land: the Scheduler applies it when a worker runs it)."""
        inputs.check_task_id(task_id)
        if not 0 < confirm_within_s <= 600:
            raise InvalidInput(f"confirm_within_s must be in (0, 600], got {confirm_within_s}")
        from sas.client import parking

        who = await self._acting_on(task_id, by, reason)
        return ActionResult(
            task_id,
            await parking.park_step(await self._temporal(), self.store, task_id, step, who, reason, confirm_within_s),
        )

    @typed
    async def resubmit(self, task_id: str, *, by: str | None = None, reason: str = "") -> ActionResult:
        """Run the task again: a parked one with FailureCount 0, a finished Compensated or Error
        one as its next incarnation (``ActionResult.incarnation``)."""
        inputs.check_task_id(task_id)
        from sas.client import operator

        who = await self._acting_on(task_id, by, reason)
        message, incarnation = await operator.resubmit(await self._temporal(), self.store, task_id, who, reason)
        return ActionResult(task_id, message, incarnation)

    @typed
    async def approve(
        self, task_id: str, *, step: str | None = None, by: str | None = None, reason: str = ""
    ) -> ActionResult:
        """Approve the step that waits for an approval: the task goes on."""
        return await self._answer_wait(task_id, step, True, by, reason)

    @typed
    async def reject(
        self, task_id: str, *, step: str | None = None, by: str | None = None, reason: str = ""
    ) -> ActionResult:
        """Reject the step that waits for an approval: the task is undone."""
        return await self._answer_wait(task_id, step, False, by, reason)

    async def _answer_wait(
        self, task_id: str, step: str | None, approved: bool, by: str | None, reason: str
    ) -> ActionResult:
        inputs.check_task_id(task_id)
        from sas.client import operator

        who = await self._acting_on(task_id, by, reason)
        temporal = await self._temporal()
        answer = await operator.answer_wait(temporal, task_id, step, approved=approved, by=who, reason=reason)
        return ActionResult(task_id, answer)

    @typed
    async def cancel(self, task_id: str, *, by: str | None = None, reason: str = "") -> ActionResult:
        """Cancel a delayed task before it starts (nothing has run), or delete the schedule of that id."""
        inputs.check_task_id(task_id)
        from sas.client import delayed

        who = await self._acting_on(task_id, by, reason)
        done = await delayed.cancel(await self._temporal(), self.store, task_id, who, reason)
        return ActionResult(task_id, done["changed"], data=done)

    @typed
    async def reschedule(
        self, task_id: str, when: timedelta | datetime, *, by: str | None = None, reason: str = ""
    ) -> ActionResult:
        """Move a delayed task's start: to ``when`` from now, or to the time ``when``."""
        inputs.check_task_id(task_id)
        who = await self._acting_on(task_id, by, reason)
        if isinstance(when, datetime):
            when = (when if when.tzinfo is not None else when.astimezone()) - datetime.now(UTC)
        delay = inputs.check_delay(when, "the new start")
        if delay is None:
            raise InvalidInput("give a new start to come", "e.g. timedelta(hours=2)", field="when")
        from sas.client import delayed

        done = await delayed.reschedule(await self._temporal(), self.store, task_id, delay, who, reason)
        return ActionResult(task_id, done["changed"], data=done)

    # ------------------------------------------------------------ selections

    @typed
    async def select(self, selection: Selection) -> Selected:
        """The tasks ``selection`` picks (oldest change first, at most its ``limit``; ``more``
        when more match), without acting on them: a dry run."""
        from sas.client import bulk

        _check_selection(selection)
        client = await self._temporal() if selection.query is not None else None
        chosen = await bulk.select(client, self.store, self.settings.temporal.task_queue, selection)
        if self.team is None:
            return chosen
        from sas.client.teams import team_types

        # A client of one team acts on its team's tasks only: the others selected are left out.
        mine = set(team_types(self.team))
        return Selected(tasks=[t for t in chosen.tasks if t.task_type in mine], more=chosen.more)

    @typed
    async def bulk(
        self,
        action: Action,
        selection: Selection,
        *,
        by: str | None = None,
        reason: str = "",
        concurrency: int = DEFAULT_CONCURRENCY,
        on_result: Callable[[Result], None] | None = None,
        on_start: Callable[[str, Selected], None] | None = None,
    ) -> BulkResult:
        """``retry``, ``compensate`` or ``resubmit`` every task ``selection`` picks, each as the
        one-task action does (a finished workflow is skipped, a refusal is that task's
        ``failed`` with the reason), at most ``concurrency`` at a time. Each audit entry's
        reason carries ``(bulk <id>)``, ``BulkResult.bulk_id``. ``on_start`` hears the bulk id
        and what was selected before the first task is acted on (a progress bar's total, a
        line that lets an interrupted run be found in the audit log), ``on_result`` each
        task's result as it comes."""
        from sas.client import bulk, operator

        if action not in ("retry", "compensate", "resubmit"):
            raise InvalidInput(f"unknown bulk action {action!r}: retry, compensate or resubmit", field="action")
        if not 1 <= concurrency <= bulk.MAX_CONCURRENCY:
            raise InvalidInput(f"concurrency {concurrency}: must be 1 to {bulk.MAX_CONCURRENCY}", field="concurrency")
        who = self._who(by, reason)
        bulk_id = uuid.uuid4().hex[:8]
        step = selection.step if action == "retry" else None
        request = operator.operator_request(
            step=step, by=who, reason=f"{reason} (bulk {bulk_id})".strip(), reset_failure_count=action == "resubmit"
        )
        chosen = await self.select(selection)
        if on_start is not None:
            on_start(bulk_id, chosen)
        if not chosen.tasks:
            return BulkResult(bulk_id, [], chosen.more)
        temporal = await self._temporal()
        results = await bulk.act_all(temporal, self.store, action, request, chosen.tasks, concurrency, on_result)
        return BulkResult(bulk_id, results, chosen.more)


def _check_selection(selection: Selection) -> None:
    """A selection that selects something, within its bound: never every task."""
    from sas.client import bulk

    if not 1 <= selection.limit <= bulk.MAX_LIMIT:
        raise InvalidInput(f"limit {selection.limit}: must be 1 to {bulk.MAX_LIMIT}", field="limit")
    given = (selection.query, selection.incident, selection.step, selection.since, selection.task_type)
    if not (selection.task_states or selection.step_states or any(v is not None for v in given)):
        raise InvalidInput("an empty selection: refusing to act on every task", field="selection")
    if selection.query is not None:
        bulk.check_query(selection.query)
