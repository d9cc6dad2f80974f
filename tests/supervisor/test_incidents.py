"""Incidents on a real dev server: fifty orders failing at one service for one
cause are one incident - one alert with the count, their own alerts folded into it - and
`sas retry --incident ID` retries exactly those fifty, with per-task results and audit, while
orders failing for another cause are left alone. The incident resolves itself once its last
task has moved on."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path
from typing import Any

from sas.state_store.alerts import list_alerts
from sas.state_store.incidents import incident_task_ids
from sas.task_models import TaskResult, TaskState
from tests.cli.test_bulk_actions import all_in, as_json, fail_charges, laddered, one_audit_each, sas
from tests.helpers import fresh_id, wait_until

N = 50


async def test_fifty_orders_failing_at_one_service_are_one_incident_retried_as_one(
    client: Any, temporal_address: str, services: Any, sqlite_url: str
) -> None:
    async with laddered(client, temporal_address, services, sqlite_url, "park") as stack:
        incident = await fail_charges(stack, "inc-charge", n=N)
        # Another cause, too few tasks for an incident: each keeps its own alert.
        others = [fresh_id("inc-ship") for _ in range(3)]
        for task_id in others:
            await stack.add_fault(
                endpoint="shipping.ship", kind="permanent", status=422, error="bad_address", match_order_id=task_id
            )
            await stack.submit(task_id)
        await all_in(stack, incident.ids, "Error", "fifty orders parked at charge")
        await all_in(stack, others, "Error", "three orders parked at ship")

        async def listed() -> list[dict[str, Any]]:
            return as_json(await sas(stack, "incidents", "--json"))  # type: ignore[no-any-return]

        [shown] = await wait_until(
            listed,
            lambda found: len(found) == 1 and found[0]["task_count"] == found[0]["parked"] == N,
            timeout=120,
            what="one incident of fifty parked tasks",
        )
        assert shown["service"] == "payment" and shown["step"] == "charge" and shown["parked"] == N
        assert shown["severity"] == "critical" and shown["status"] == "open"
        assert set(shown["sample_task_ids"]) <= set(incident.ids) and len(shown["sample_task_ids"]) == 5
        assert f"sas retry --incident {shown['id']}" in shown["suggested_action"]
        async with stack.sessions() as session:
            assert sorted(await incident_task_ids(session, shown["id"], 1000)) == sorted(incident.ids)
            listed_alerts = await list_alerts(session, "open", 1000, include_folded=False)
            every = await list_alerts(session, "open", 1000)
        # The fifty orders' own alerts are folded into the incident; the other cause's are not.
        assert {a.task_id for a in listed_alerts if a.task_id} == set(others)
        assert [a.id for a in listed_alerts if a.kind == "incident"] == [shown["id"]]
        assert {a.task_id for a in every if a.task_id} == set(incident.ids) | set(others)
        table = await sas(stack, "alerts", columns=100)
        assert table.returncode == 0 and f"{N} alert(s) of tasks in open incidents are folded" in table.stdout
        listing = await sas(stack, "incidents", columns=100)
        assert listing.returncode == 0 and f"sas retry --incident {shown['id']} --dry-run" in listing.stdout
        one = await sas(stack, "incidents", str(shown["id"]), "--limit", "5", columns=100)
        assert one.returncode == 0 and "its 50 task(s) (the first 5; --limit for more):" in one.stdout
        capture(listing, one, table)

        await incident.over()
        plan = as_json(await sas(stack, "retry", "--incident", str(shown["id"]), "--dry-run", "--json"))
        assert sorted(t["task_id"] for t in plan["tasks"]) == sorted(incident.ids)
        done = as_json(
            await sas(
                stack,
                "retry",
                "--incident",
                str(shown["id"]),
                "--yes",
                "--json",
                "--concurrency",
                "16",
                "--by",
                "alice",
                "--reason",
                "payment is back",
            )
        )
        assert done["counts"] == {"ok": N, "skipped": 0, "failed": 0}
        assert sorted(r["task_id"] for r in done["results"]) == sorted(incident.ids)
        results: list[TaskResult] = await asyncio.wait_for(
            asyncio.gather(
                *(stack.client.get_workflow_handle(t, result_type=TaskResult).result() for t in incident.ids)
            ),
            timeout=180,
        )
        assert {r.state for r in results} == {TaskState.PROCESSED}
        await one_audit_each(stack, incident.ids, "retry", "payment is back", done["bulk_id"])
        # The other cause's orders were not touched.
        assert {t: await stack.task_state(t) for t in others} == dict.fromkeys(others, "Error")

        resolved = await wait_until(
            lambda: sas(stack, "incidents", "--status", "all", "--json"),
            lambda out: out.returncode == 0 and '"status": "resolved"' in out.stdout,
            what="the incident to resolve itself",
        )
        [after] = as_json(resolved)
        assert after["id"] == shown["id"] and after["resolution"].startswith("recovered: every task moved on")
        assert as_json(await sas(stack, "incidents", "--json")) == []


def capture(*runs: subprocess.CompletedProcess[str]) -> None:
    """With SAS_DOCS_CAPTURE=<file>, what the operator's terminal showed (docs/operator.md)."""
    target = os.environ.get("SAS_DOCS_CAPTURE")
    if target:
        text = "\n".join(f"$ {' '.join(['sas', *r.args[3:]])}\n{r.stdout.rstrip()}\n" for r in runs)
        Path(target).write_text(text)
