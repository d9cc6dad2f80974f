"""Workflows that Temporal itself marks as stuck in workflow task failures
(``TemporalReportedProblems``), looked up on sas's task queues as part of the queue check.

This finds even a workflow that never reached the mirror (a payload its worker cannot
decrypt, a non-determinism error at start), which the mirror-based check
(``supervisor/orphans.py``) cannot see.
"""

from __future__ import annotations

import logging
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio.client import Client
from temporalio.service import RPCError

from sas.state_store.alerts import active_alerts_of_kind
from sas.state_store.queries import get_task_row
from sas.supervisor.activity_support import beat
from sas.supervisor.alert_rows import raise_once, resolve_key
from sas.supervisor.models import AlertSpec

log = logging.getLogger("sas.supervisor")


async def check_reported_problems(
    sessions: async_sessionmaker[AsyncSession], client: Client, queues: dict[str, None], now: datetime
) -> int:
    """One alert per workflow on ``queues`` that Temporal reports stuck; resolved when the mark
    goes. The number of stuck workflows (0 on a server without the search attribute)."""
    listed = " OR ".join(f"TaskQueue = '{q}'" for q in queues)
    query = f"TemporalReportedProblems IS NOT NULL AND ExecutionStatus = 'Running' AND ({listed})"
    try:
        stuck = [w async for w in client.list_workflows(query, limit=100)]
    except RPCError as err:
        log.debug("TemporalReportedProblems not searchable here: %s", err.message)
        return 0
    marked = set()
    for wf in stuck:
        beat()
        problems = wf.search_attributes.get("TemporalReportedProblems") or []
        key = f"workflow_stuck:{wf.id}"
        marked.add(key)
        spec = AlertSpec(
            severity="critical",
            kind="workflow_stuck",
            message=(
                f"workflow {wf.id} ({wf.workflow_type}): its workflow task keeps failing "
                f"({', '.join(map(str, problems)) or 'reported by Temporal'}), so it cannot make progress"
            ),
            suggested_action=(
                "see the WorkflowTaskFailed event in the Temporal UI: a payload that cannot be decrypted "
                "(check SAS_ENCRYPTION__KEYS on every worker), or new code that does not match its history "
                "(docs/replay.md); fix the cause, or terminate it"
            ),
        )
        await raise_once(sessions, spec, key, now, task_id=wf.id)
    async with sessions() as session:
        gone = [
            a.incident_key
            for a in await active_alerts_of_kind(session, "workflow_stuck")
            if a.incident_key not in marked
        ]
    for key in gone:
        async with sessions() as session:
            task = await get_task_row(session, key.split(":", 1)[1])
        if task is None:  # the mirror-based check (check_orphans) owns the rest
            await resolve_key(sessions, key, now, "Temporal no longer reports a problem")
    return len(stuck)
