"""Telling the submitter (seed 000's private response queue): the Scheduler posts status
events to the task's callback URL. Each post is signed (HMAC-SHA256 of the body) and
carries a stable event id, so a receiver can drop the retries it has already seen."""

from __future__ import annotations

import hashlib
import hmac
import json

import httpx
from temporalio import activity
from temporalio.exceptions import ApplicationError

from task_models import CallbackEvent

SIGNATURE_HEADER = "X-Sas-Signature"
EVENT_ID_HEADER = "X-Sas-Event-Id"


def sign(secret: bytes, body: bytes) -> str:
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def verify(secret: bytes, body: bytes, signature: str) -> bool:
    return hmac.compare_digest(sign(secret, body), signature)


class CallbackActivities:
    def __init__(self, http: httpx.AsyncClient, secret: bytes | None) -> None:
        self._http = http
        self._secret = secret

    @activity.defn(name="callback.post")
    async def post(self, event: CallbackEvent) -> None:
        body = json.dumps(event.model_dump(mode="json", exclude={"url"}), sort_keys=True).encode()
        headers = {"Content-Type": "application/json", EVENT_ID_HEADER: event.event_id}
        if self._secret:
            headers[SIGNATURE_HEADER] = sign(self._secret, body)
        try:
            response = await self._http.post(event.url, content=body, headers=headers, timeout=10)
        except httpx.HTTPError as err:
            raise ApplicationError(
                f"callback {event.url} unreachable: {type(err).__name__}", type="CallbackTransient"
            ) from err
        if response.status_code >= 500 or response.status_code in (408, 429):
            raise ApplicationError(f"callback {event.url} answered {response.status_code}", type="CallbackTransient")
        if response.status_code >= 400:
            # The receiver refuses this event: retrying will not change its mind.
            raise ApplicationError(
                f"callback {event.url} refused event {event.event_id}: {response.status_code}",
                type="CallbackRejected",
                non_retryable=True,
            )
