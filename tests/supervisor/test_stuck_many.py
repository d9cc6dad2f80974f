"""Every stuck workflow is seen: with 150 workflows whose workflow task keeps
failing before they ever reach the mirror (here: a workflow type no worker has any more), the
Supervisor pages through all that Temporal reports (``TemporalReportedProblems``), raises 150
alerts and resolves none while Temporal still reports it; `sas list` shows all 150. Once some
are terminated, exactly theirs resolve."""

from __future__ import annotations

import asyncio
from typing import Any

from sas.settings import SupervisorSettings
from sas.state_store.alerts import list_alerts
from sas.supervisor.models import SweepStats
from tests.cli.test_cli import as_json, sas
from tests.helpers import fresh_id, wait_until
from tests.stack import start_stack

N = 150


async def test_all_150_stuck_workflows_are_seen_and_none_resolved_while_reported(
    client: Any, temporal_address: str, services: Any, sqlite_url: str
) -> None:
    supervisor = SupervisorSettings(
        interval_s=0.5, max_interval_s=1.0, queue_check_s=0.5, cooldown_tries=0, workflow_id=fresh_id("sup-stuck")
    )
    async with start_stack(client, temporal_address, services.url, sqlite_url, supervisor_settings=supervisor) as stack:
        run = fresh_id("retired")
        ids = [f"{run}-{i}" for i in range(N)]
        gate = asyncio.Semaphore(32)

        async def start(workflow_id: str) -> None:
            async with gate:
                await client.start_workflow(
                    "RetiredWorkflow", id=workflow_id, task_queue=stack.settings.temporal.task_queue
                )

        await asyncio.gather(*(start(i) for i in ids))

        async def stuck_alerts() -> dict[str, Any]:
            async with stack.sessions() as session:
                every = await list_alerts(session, None, 10 * N)
            return {a.task_id: a for a in every if a.kind == "workflow_stuck" and a.task_id in ids}

        found = await wait_until(stuck_alerts, lambda a: len(a) == N, timeout=180, interval=1, what="150 alerts")
        assert {a.status for a in found.values()} == {"open"}

        # Three more queue checks: Temporal still reports every one, so none is resolved.
        handle = client.get_workflow_handle(stack.settings.supervisor.workflow_id)
        seen = (await handle.query("stats", result_type=SweepStats)).queue_checks
        await wait_until(
            lambda: handle.query("stats", result_type=SweepStats),
            lambda s: s.queue_checks >= seen + 3,
            what="three more queue checks",
        )
        after = await stuck_alerts()
        assert len(after) == N and {a.status for a in after.values()} == {"open"}
        assert {a.id for a in after.values()} == {a.id for a in found.values()}

        listed = as_json(await sas(stack, "list", "--json"))
        assert {r["task_id"] for r in listed if r["state"] == "Stuck"} >= set(ids)
        shown = await sas(stack, "list")
        assert shown.returncode == 0 and f"{N} stuck before the mirror saw them" in shown.stdout

        # Ten are terminated: Temporal no longer reports them, and exactly their alerts resolve.
        gone = ids[:10]
        await asyncio.gather(*(client.get_workflow_handle(i).terminate("retired for good") for i in gone))

        def resolved(alerts: dict[str, Any]) -> set[str]:
            return {task_id for task_id, a in alerts.items() if a.status == "resolved"}

        final = await wait_until(stuck_alerts, lambda a: resolved(a) == set(gone), timeout=60, what="ten resolved")
        assert all(final[i].resolution == "Temporal no longer reports a problem" for i in gone)
        await asyncio.gather(*(client.get_workflow_handle(i).terminate("test over") for i in ids[10:]))
