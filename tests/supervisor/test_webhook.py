"""The alert webhook (issue 3, part 3): a real HTTP receiver on loopback gets each alert as
signed JSON, a receiver that fails is tried again, and one that hangs or is down never
holds up a sweep."""

from __future__ import annotations

import asyncio
import base64
import json
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import pytest_asyncio
import uvicorn
from pydantic import SecretStr
from standardwebhooks import Webhook, WebhookVerificationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from sas.settings import WebhookSettings
from sas.state_store.alerts import list_alerts
from sas.task_models import TaskState
from sas_demo_services.launcher import free_port
from tests.helpers import fresh_id, wait_until
from tests.supervisor.conftest import Rig

SECRET = "whsec_" + base64.b64encode(b"webhook-test-secret-of-32-bytes!").decode()
pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


@dataclass
class Hook:
    """An operator's alert endpoint: ``flaky`` refuses its first delivery, ``hang`` never answers
    (until the test ends), ``slow`` takes a second to answer each."""

    mode: str
    received: list[tuple[dict[str, str], bytes, int]] = field(default_factory=list)  # headers, body, answer
    in_flight: int = 0
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, request: Request) -> JSONResponse:
        body = await request.body()
        headers = {k.lower(): v for k, v in request.headers.items()}
        if self.mode == "hang":
            self.in_flight += 1
            try:
                await self.release.wait()
            finally:
                self.in_flight -= 1
        if self.mode == "slow":
            await asyncio.sleep(1.0)  # the receiver's own slowness, not a wait of the test
        status = 503 if self.mode == "flaky" and not self.received else 200
        self.received.append((headers, body, status))
        return JSONResponse({"ok": status == 200}, status_code=status)

    def accepted(self) -> list[dict[str, Any]]:
        return [json.loads(body) for _, body, status in self.received if status == 200]


@pytest_asyncio.fixture
async def serve_hook() -> AsyncIterator[Any]:
    """``await serve_hook(mode)`` -> (Hook, url), served by uvicorn on loopback."""
    running: list[tuple[Hook, uvicorn.Server, asyncio.Task[None]]] = []

    async def serve(mode: str) -> tuple[Hook, str]:
        hook = Hook(mode)
        port = free_port()
        app = Starlette(routes=[Route("/alerts", hook.handle, methods=["POST"])])
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        task = asyncio.create_task(server.serve())
        running.append((hook, server, task))
        await wait_until(lambda: asyncio.sleep(0, server.started), what="alert receiver up")
        return hook, f"http://127.0.0.1:{port}/alerts"

    try:
        yield serve
    finally:
        for hook, server, task in running:
            hook.release.set()
            server.should_exit = True
            await task


def verified(headers: dict[str, str], body: bytes) -> bool:
    """What an operator's receiver does: Standard Webhooks verification with the shared secret."""
    try:
        Webhook(SECRET).verify(body, headers)
    except WebhookVerificationError:
        return False
    return True


def webhook(url: str, **changes: Any) -> WebhookSettings:
    values: dict[str, Any] = {
        "url": url,
        "secret": SecretStr(SECRET),
        "timeout_s": 5.0,
        "max_attempts": 6,
        "retry_delay_s": 0.2,
    }
    values.update(changes)
    return WebhookSettings(**values)


async def all_alerts(rig: Rig) -> list[Any]:
    async with rig.sessions() as session:
        return await list_alerts(session, limit=1000)


async def test_each_alert_is_posted_signed_and_a_failed_post_is_retried(make_rig, serve_hook) -> None:  # type: ignore[no-untyped-def]
    hook, url = await serve_hook("flaky")
    # Parked rather than compensated: the alerts stay open (a recovered task resolves its alert).
    rig: Rig = await make_rig(outcome="park", webhook=webhook(url))
    await rig.start_supervisor("sup-hook", rig.settings.supervisor.workflow_id)
    task_ids = [fresh_id("hook") for _ in range(2)]
    handles = []
    for task_id in task_ids:
        await rig.add_fault(
            endpoint="shipping.ship",
            kind="permanent",
            status=422,
            error="address_rejected",
            message="no such street",
            match_order_id=task_id,
        )
        handles.append(await rig.submit(task_id))

    async def ours() -> list[Any]:
        return [a for a in await all_alerts(rig) if a.task_id in task_ids]

    alerts = await wait_until(
        ours,
        lambda a: len(a) == 2 and all(x.delivered_at is not None for x in a),
        timeout=60,
        what="both alerts delivered",
    )
    by_id = {a.id: a for a in alerts}

    # Every post is signed over its exact body (Standard Webhooks) and its message id names its alert.
    assert hook.received and all(verified(h, body) for h, body, _ in hook.received)
    assert all(h.get("content-type") == "application/json" for h, _, _ in hook.received)
    assert all(h["webhook-id"].startswith(f"alert-{json.loads(body)['id']}-") for h, body, _ in hook.received)
    # A retry is the same message: same id, so a receiver drops a duplicate.
    assert hook.received[0][0]["webhook-id"] in {h["webhook-id"] for h, _, status in hook.received[1:]}
    # The first post was refused and tried again; each alert was accepted exactly once.
    first = json.loads(hook.received[0][1])
    assert hook.received[0][2] == 503
    assert by_id[first["id"]].delivery_attempts >= 2
    accepted = hook.accepted()
    assert Counter(a["id"] for a in accepted) == Counter(by_id.keys())
    for body in accepted:
        row = by_id[body["id"]]
        assert {k: body[k] for k in ("task_id", "step", "kind", "severity", "failure_count", "status")} == {
            "task_id": row.task_id,
            "step": "ship",
            "kind": "permanent_failure",
            "severity": "critical",
            "failure_count": 1,
            "status": "open",
        }
        assert "no such street" in body["last_error"] and body["suggested_action"] and body["message"]
    for handle in handles:
        await handle.terminate("test over")


@pytest.mark.parametrize("mode", ["hang", "down"])
async def test_a_hung_or_dead_receiver_does_not_hold_up_sweeps(make_rig, serve_hook, mode: str) -> None:  # type: ignore[no-untyped-def]
    if mode == "hang":
        hook, url = await serve_hook("hang")
    else:
        hook, url = None, f"http://127.0.0.1:{free_port()}/alerts"  # nothing listens there
    rig: Rig = await make_rig(outcome="park", webhook=webhook(url, timeout_s=30.0 if mode == "hang" else 1.0))
    await rig.start_supervisor("sup-stuck-hook", rig.settings.supervisor.workflow_id)

    parked = fresh_id("hook-parked")
    await rig.add_fault(endpoint="shipping.ship", kind="permanent", status=422, match_order_id=parked)
    parked_handle = await rig.submit(parked)

    async def parked_alert() -> Any:
        return next((a for a in await all_alerts(rig) if a.task_id == parked), None)

    if hook is not None:
        await wait_until(lambda: asyncio.sleep(0, hook.in_flight), timeout=60, what="a delivery hanging")
    else:
        await wait_until(
            parked_alert, lambda a: a is not None and a.delivery_attempts >= 1, timeout=60, what="a delivery refused"
        )

    # While that delivery hangs (or keeps failing), other orders still get their decisions.
    retried = [fresh_id("hook-retry") for _ in range(2)]
    handles = []
    for task_id in retried:
        await rig.add_fault(endpoint="shipping.ship", kind="transient", times=2, match_order_id=task_id)
        handles.append(await rig.submit(task_id))
    for task_id, handle in zip(retried, handles, strict=True):
        assert (await asyncio.wait_for(handle.result(), 60)).state == TaskState.PROCESSED
        assert [(d.kind, d.failure_count) for d in await rig.decisions(task_id) if d.kind != "wait"] == [("retry", 1)]
    assert await rig.task_state(parked) == "Error"

    alert = await parked_alert()
    assert alert is not None and alert.delivered_at is None and alert.status == "open"
    if hook is not None:
        assert hook.in_flight == 1 and hook.received == []  # still hanging: nothing finished
    else:
        # Still being tried, with a growing delay, not given up.
        await wait_until(parked_alert, lambda a: a.delivery_attempts >= 2, timeout=30, what="the delivery retried")
    await parked_handle.terminate("test over")
