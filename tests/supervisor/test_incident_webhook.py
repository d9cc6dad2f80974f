"""The alert webhook hears of an incident, not of each of its tasks: twelve
orders refused at one service are one incident, posted when it opens (and again only when it
changes: escalates, doubles, resolves), with its cause, count and sample; the orders' own
alerts are folded into it and not posted, but for those raised before the incident existed
(fewer than its threshold of five)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from sas.task_models import TaskResult
from tests.helpers import fresh_id, wait_until
from tests.supervisor.conftest import Rig
from tests.supervisor.test_webhook import serve_hook, verified, webhook

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
__all__ = ["serve_hook"]  # the fixture, used by name

N = 12


async def test_one_delivery_per_incident_change_not_one_per_task(make_rig, serve_hook) -> None:  # type: ignore[no-untyped-def]
    hook, url = await serve_hook("ok")
    rig: Rig = await make_rig(outcome="park", webhook=webhook(url))
    await rig.start_supervisor("sup-incident-hook", rig.settings.supervisor.workflow_id)
    ids = [fresh_id("hooked") for _ in range(N)]
    faults = []
    for task_id in ids:
        faults.append(
            await rig.add_fault(
                endpoint="payment.charge", kind="permanent", status=422, error="card_declined", match_order_id=task_id
            )
        )
    handles = await asyncio.gather(*(rig.submit(t) for t in ids))

    def incident_posts() -> list[dict[str, Any]]:
        return [a for a in hook.accepted() if a["kind"] == "incident"]

    async def parked() -> list[str | None]:
        return [await rig.task_state(t) for t in ids]

    await wait_until(parked, lambda s: s == ["Error"] * N, timeout=90, what="twelve orders parked")
    opened = await wait_until(_probe(incident_posts), bool, what="the incident posted")
    first = opened[0]
    assert first["status"] == "open" and first["incident"]["service"] == "payment"
    assert first["incident"]["step"] == "charge" and set(first["incident"]["sample_task_ids"]) <= set(ids)

    # Retry the twelve at once: they complete, the incident resolves, and that is posted once.
    for fault in faults:
        await rig.remove_fault(fault)
    for handle in handles:
        await handle.execute_update("request_retry", _request())
    await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), timeout=120)
    posts = await wait_until(
        _probe(incident_posts), lambda p: any(x["status"] == "resolved" for x in p), timeout=60, what="resolved post"
    )
    assert [p["status"] for p in posts].count("resolved") == 1
    # Opened, perhaps doubled (5 -> 10 as the failures came in), resolved: never one per task.
    assert len(posts) <= 3
    assert {p["id"] for p in posts} == {first["id"]}
    # Each change is its own message (its id names the change), every post signed.
    ids_sent = [h["webhook-id"] for h, body, status in hook.received if json.loads(body)["kind"] == "incident"]
    assert len(set(ids_sent)) == len(posts) and all(i.startswith(f"incident-{first['id']}-") for i in ids_sent)
    assert all(verified(h, body) for h, body, _ in hook.received)
    per_task = [a for a in hook.accepted() if a["kind"] != "incident" and a["task_id"] in ids]
    assert len(per_task) < 5, [a["kind"] for a in per_task]  # only those raised before the incident
    for result in [await h.result() for h in handles]:
        assert isinstance(result, TaskResult)


def _probe(read: Any) -> Any:
    async def probe() -> Any:
        return read()

    return probe


def _request() -> Any:
    from sas.task_models import OperatorRequest

    return OperatorRequest(by="test", reason="payment is back")
