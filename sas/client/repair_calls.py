"""``TaskClient``'s repairs of one task (``sas.client.repairs``): a step completed by hand, a step
retried with a changed input, a step skipped, and a task finished in Error redriven from a step
(``sas.client.redrive``). Each is checked here, then validated and audited by the task's
Scheduler; ``dry_run`` asks its checks only."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sas.client import inputs
from sas.client.core import ClientCore, typed
from sas.client.results import ActionResult


class RepairCalls(ClientCore):
    """The repairs of ``TaskClient`` (its part for ``sas complete``, ``fix-input`` and ``skip``)."""

    @typed
    async def complete_step(
        self,
        task_id: str,
        step: str,
        result: Mapping[str, Any],
        *,
        by: str | None = None,
        reason: str,
        force: bool = False,
        dry_run: bool = False,
    ) -> str:
        """Complete ``step``, waiting for a decision, by hand: an operator made its call some
        other way (the payment taken over the phone), and ``result`` is what its service would have
        answered. The Scheduler checks it against the step's result model, audits it, keeps it
        like any result (the steps after it read it, its undo gets it) and goes on. Refused while
        the task is undone, for a wait, and past the pivot unless ``force``. ``dry_run``: the
        Scheduler's checks only, nothing changed. Returns what was (or would be) done."""
        from sas.client import repairs

        inputs.check_task_id(task_id)
        who = await self._acting_on(task_id, by, reason)
        done = repairs.completion(step, result, who, reason, force=force)
        return await repairs.complete_step(await self._temporal(), task_id, done, dry_run=dry_run)

    @typed
    async def retry_with_input(
        self,
        task_id: str,
        fields: Mapping[str, Any],
        *,
        step: str | None = None,
        by: str | None = None,
        reason: str,
        force: bool = False,
        dry_run: bool = False,
    ) -> str:
        """Retry the step waiting for a decision with some of the task's input changed (a bad
        address fixed): ``fields`` are its top-level fields, each to its new value. The Scheduler
        checks the changed input against the type's input model, audits what changed and makes
        every call from then on with it. Refused while the task is undone, for a wait, and past
        the pivot unless ``force``. ``dry_run``: the Scheduler's checks only. Returns what was
        (or would be) done."""
        from sas.client import repairs

        inputs.check_task_id(task_id)
        who = await self._acting_on(task_id, by, reason)
        change = repairs.input_change(step, fields, who, reason, force=force)
        return await repairs.retry_with_input(await self._temporal(), task_id, change, dry_run=dry_run)

    @typed
    async def skip_step(
        self,
        task_id: str,
        step: str,
        *,
        by: str | None = None,
        reason: str,
        force: bool = False,
        dry_run: bool = False,
    ) -> str:
        """Skip ``step``, waiting for a decision, where its task type declares it ``skippable``:
        the task goes on without it (Skipped, with who and why), the steps after it find no
        result of it, and its undo is never called. Refused for a step not declared skippable,
        while the task is undone, for a wait, and past the pivot unless ``force``. ``dry_run``:
        the Scheduler's checks only. Returns what was (or would be) done."""
        from sas.client import repairs

        inputs.check_task_id(task_id)
        who = await self._acting_on(task_id, by, reason)
        skip = repairs.step_skip(step, who, reason, force=force)
        return await repairs.skip_step(await self._temporal(), task_id, skip, dry_run=dry_run)

    @typed
    async def redrive(
        self,
        task_id: str,
        from_step: str,
        *,
        by: str | None = None,
        reason: str,
        force: bool = False,
        dry_run: bool = False,
    ) -> ActionResult:
        """Run a task finished in Error again from ``from_step``, as its next incarnation: the
        steps of the stages before it are kept done (not called again; the steps after them read
        their results, and an undo names them, under their old idempotency keys), and the rest
        run again. Refused for a task not finished in Error, for a step before a fan-out, a child
        step or a result with secret fields, and for running a done pivot again unless
        ``force``. ``dry_run``: says what would be kept and run, starts nothing. Audited as
        ``redrive``; ``ActionResult.incarnation`` is the new incarnation (None for a dry run)."""
        from sas.client import redrive, repairs

        inputs.check_task_id(task_id)
        inputs.check_step_name(from_step)
        repairs.require_reason(reason, "a redrive")
        who = await self._acting_on(task_id, by, reason)
        message, incarnation = await redrive.redrive(
            await self._temporal(), self.store, task_id, from_step, who, reason, force=force, dry_run=dry_run
        )
        return ActionResult(task_id, message, incarnation)
