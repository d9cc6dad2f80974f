"""Status events posted to the submitter's callback URL (activities/callbacks.py sends them)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from sas.task_models import CallbackEvent, TaskStatus
    from sas.task_models.activity_defs import CallbackDefs

# A submitter's endpoint may be down for a while; keep trying for about half an hour.
_CALLBACK_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=120), maximum_attempts=20
)


class Notifier:
    def __init__(self) -> None:
        self.url: str | None = None
        self.incarnation = 1
        self._posts: list[workflow.ActivityHandle[None]] = []

    def notify(
        self,
        status: TaskStatus,
        stamp: int,
        kind: str,
        results: dict[str, dict[str, Any]],
        step: str | None = None,
        detail: str | None = None,
    ) -> None:
        """Post a status event, if the task has a callback URL. Not awaited: a slow receiver
        must not hold the task up."""
        if not self.url:
            return
        # The event id is the receiver's key for dropping duplicates (webhook-id): it names the
        # incarnation, so a resubmitted task's events are never taken for the first one's.
        task = status.task_id if self.incarnation <= 1 else f"{status.task_id}#{self.incarnation}"
        event = CallbackEvent(
            event_id=f"{task}:{stamp}:{kind}" + (f":{step}" if step else ""),
            kind=kind,
            task_id=status.task_id,
            task_type=status.task_type,
            state=status.state,
            step=step,
            detail=detail,
            at=workflow.now(),
            url=self.url,
            results=results,
        )
        self._posts.append(
            workflow.start_activity_method(
                CallbackDefs.post,
                event,
                start_to_close_timeout=timedelta(seconds=15),
                retry_policy=_CALLBACK_RETRY,
                summary=f"post '{kind}' to the submitter's callback URL",  # the URL itself is not shown
            )
        )

    async def delivered(self) -> list[str]:
        """Wait for the posts still under way; those that gave up, said (they do not fail the task)."""
        failed = []
        for handle in self._posts:
            try:
                await handle
            except ActivityError as err:
                failed.append(f"callback not delivered: {err.cause or err}")
        return failed
