"""Workflows that Temporal itself marks as stuck in workflow task failures
(``TemporalReportedProblems``), looked up on sas's task queues as part of the queue check.

This finds even a workflow that never reached the mirror (a payload its worker cannot
decrypt, a non-determinism error at start), which the mirror-based check
(``supervisor/detect/orphans.py``) cannot see.
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
from sas.supervisor.alert import raise_once, resolve_key
from sas.supervisor.models import AlertSpec

log = logging.getLogger("sas.supervisor")

# Workflows read per page of the visibility list; every page is read.
_PAGE = 1000


async def check_reported_problems(
    sessions: async_sessionmaker[AsyncSession], client: Client, queues: dict[str, None], now: datetime
) -> int:
    """One alert per workflow on ``queues`` that Temporal reports stuck; resolved when the mark
    goes. The number of stuck workflows (0 on a server without the search attribute).

    Every page of the list is read (reading only the first 100 would resolve the alerts of the
    rest while Temporal still reported them). An alert is resolved only after a complete
    listing that no longer has its workflow: a listing cut short resolves nothing."""
    listed = " OR ".join(f"TaskQueue = '{q}'" for q in queues)
    query = f"TemporalReportedProblems IS NOT NULL AND ExecutionStatus = 'Running' AND ({listed})"
    marked: set[str] = set()
    try:
        async for wf in client.list_workflows(query, page_size=_PAGE):
            beat()
            key = f"workflow_stuck:{wf.id}"
            if key in marked:
                continue  # a workflow listed twice across pages as the list changed under us
            marked.add(key)
            problems = [str(p) for p in wf.search_attributes.get("TemporalReportedProblems") or []]
            await raise_once(sessions, _stuck(wf.id, wf.workflow_type, problems), key, now, task_id=wf.id)
    except RPCError as err:
        if not marked:
            log.debug("TemporalReportedProblems not searchable here: %s", err.message)
            return 0
        # Part of the list was read: its alerts are raised, and none is resolved on a partial view.
        log.warning("stuck workflows listed in part (%d): %s", len(marked), err.message)
        return len(marked)
    gone: list[str] = []
    async with sessions() as session:
        for alert in await active_alerts_of_kind(session, "workflow_stuck", limit=None):
            if alert.incident_key not in marked:
                gone.append(alert.incident_key)
    for key in gone:
        async with sessions() as session:
            task = await get_task_row(session, key.split(":", 1)[1])
        if task is None:  # the mirror-based check (check_orphans) owns the rest
            await resolve_key(sessions, key, now, "Temporal no longer reports a problem")
    return len(marked)


def _stuck(workflow_id: str, workflow_type: str | None, problems: list[str]) -> AlertSpec:
    return AlertSpec(
        severity="critical",
        kind="workflow_stuck",
        message=(
            f"workflow {workflow_id} ({workflow_type}): its workflow task keeps failing "
            f"({', '.join(problems) or 'reported by Temporal'}), so it cannot make progress"
        ),
        suggested_action=(
            "see the WorkflowTaskFailed event in the Temporal UI: a payload that cannot be decrypted "
            "(check SAS_ENCRYPTION__KEYS on every worker), or new code that does not match its history "
            "(docs/replay.md); fix the cause, or terminate it"
        ),
    )
