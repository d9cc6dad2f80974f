"""The submitter hears about its task: status events signed per Standard Webhooks, each exactly
once per event id (``webhook-id``)."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator

import pytest_asyncio
import uvicorn
from standardwebhooks import Webhook, WebhookVerificationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from sas.task_models import TaskState
from sas_demo_services.launcher import free_port
from tests.helpers import fresh_id, wait_until
from tests.stack import CALLBACK_SECRET, Stack, order


class Receiver:
    """A submitter's endpoint that fails its first delivery, to show that posts are retried."""

    def __init__(self) -> None:
        self.deliveries: list[dict] = []
        self.bad_signatures = 0
        self.failed_once = False
        self.refused_id: str | None = None  # the event id of the delivery answered 503

    async def handle(self, request: Request) -> JSONResponse:
        body = await request.body()
        try:
            Webhook(CALLBACK_SECRET).verify(body, dict(request.headers))
        except WebhookVerificationError:
            self.bad_signatures += 1
            return JSONResponse({"error": "bad signature"}, status_code=401)
        if not self.failed_once:
            self.failed_once = True
            self.refused_id = request.headers["webhook-id"]
            return JSONResponse({"error": "busy"}, status_code=503)
        event = json.loads(body)
        assert request.headers["webhook-id"] == event["event_id"]
        self.deliveries.append(event)
        return JSONResponse({"ok": True})

    def by_id(self) -> dict[str, dict]:
        return {e["event_id"]: e for e in self.deliveries}


@pytest_asyncio.fixture
async def receiver() -> AsyncIterator[tuple[Receiver, str]]:
    got = Receiver()
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            Starlette(routes=[Route("/events", got.handle, methods=["POST"])]),
            host="127.0.0.1",
            port=port,
            log_level="warning",
        )
    )
    task = asyncio.create_task(server.serve())
    await wait_until(lambda: asyncio.sleep(0, server.started), what="callback receiver up")
    try:
        yield got, f"http://127.0.0.1:{port}/events"
    finally:
        server.should_exit = True
        await task


async def test_every_event_arrives_signed_and_once_per_event_id(stack: Stack, receiver) -> None:
    got, url = receiver
    task_id = fresh_id("cb")
    result = await (await stack.submit(task_id, order(callback_url=url))).result()
    assert result.state == TaskState.PROCESSED
    events = got.by_id()
    # In the order the task made them: by time, then by the record stamp in the event id (events
    # of one workflow task share a time), then the task's own end last. The order they arrive in
    # is the receiver's: posts run side by side, and the refused first one comes again later.
    made = sorted(events.values(), key=lambda e: (e["at"], int(e["event_id"].split(":")[1]), e["kind"] == "completed"))
    kinds = [e["kind"] for e in made]
    assert kinds == ["received", "step_completed", "step_completed", "step_completed", "completed"]
    assert [e["step"] for e in made if e["kind"] == "step_completed"] == ["reserve", "charge", "ship"]
    assert all(e["task_id"] == task_id for e in events.values())
    assert got.bad_signatures == 0
    # The first post was refused with 503 and retried under the same event id: the receiver
    # saw each id once among accepted deliveries, the refused one among them.
    assert got.failed_once and got.refused_id is not None
    assert got.refused_id in events  # delivered later under the same id
    assert len(got.deliveries) == len(events) == 5
    assert max(Counter(e["event_id"] for e in got.deliveries).values()) == 1


async def test_compensated_task_reports_failure_and_compensation(stack: Stack, receiver) -> None:
    got, url = receiver
    task_id = fresh_id("cb-comp")
    handle = await stack.submit(task_id, order(callback_url=url, card="4000000000000002"))
    assert (await handle.result()).state == TaskState.COMPENSATED
    kinds = [e["kind"] for e in sorted(got.by_id().values(), key=lambda e: e["at"])]
    assert kinds[0] == "received" and "failed" in kinds and kinds[-1] == "compensated"
    failed = next(e for e in got.by_id().values() if e["kind"] == "failed")
    assert failed["step"] == "charge" and "card_declined" in failed["detail"]
