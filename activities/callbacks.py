"""Telling the submitter (the pattern's private response queue): the Scheduler posts status
events to the task's callback URL, through the checked, pinned and signed sender of
``activities/outbound.py`` (Standard Webhooks). Each event's ``webhook-id`` is its stable
event id, so a receiver can drop the retries it has already seen."""

from __future__ import annotations

import json

from temporalio.exceptions import ApplicationError

from sas.activities.outbound import WebhookSender
from sas.task_models import CallbackEvent
from sas.task_models.activity_defs import CallbackDefs, implements

_TIMEOUT_S = 10.0


class CallbackActivities(CallbackDefs):
    def __init__(self, sender: WebhookSender) -> None:
        self._sender = sender

    @implements(CallbackDefs.post)
    async def post(self, event: CallbackEvent) -> None:
        body = json.dumps(event.model_dump(mode="json", exclude={"url"}), sort_keys=True).encode()
        delivery = await self._sender.send(event.url, event.event_id, body, _TIMEOUT_S)
        if delivery.ok:
            return
        if delivery.retryable:
            raise ApplicationError(f"callback {event.url}: {delivery.problem}", type="CallbackTransient")
        # Refused by the outbound policy, or by the receiver: retrying will not change either mind.
        raise ApplicationError(
            f"callback {event.url} not delivered (event {event.event_id}): {delivery.problem}",
            type="CallbackRejected",
            non_retryable=True,
        )
