"""What the chaos run (bench/chaos.py) reads at the end, beside the mirror and the ledgers:
Temporal's word on each task, and the keys the demo services have voided."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

from bench import _chaos_check as check


async def temporal_view(
    client: Any, tasks: list[str], children: frozenset[str] = frozenset()
) -> dict[str, check.TemporalView]:
    """What Temporal says of each task: its workflow's status, and its result, status query or
    clean-up. A child task's clean-up is looked for even when it completed: its parent may have
    undone it since."""
    from temporalio.client import WorkflowExecutionStatus
    from temporalio.service import RPCError, RPCStatusCode

    from sas.task_models import TaskResult, TaskStatus

    gate = asyncio.Semaphore(16)

    async def cleanup_of(order: str) -> str | None:
        try:
            c = await client.get_workflow_handle(f"cleanup-{order}").describe()
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            return None
        return WorkflowExecutionStatus(c.status).name if c.status else "UNKNOWN"

    async def one(order: str) -> tuple[str, check.TemporalView]:
        async with gate:
            handle = client.get_workflow_handle(order)
            described = await handle.describe()
            status = WorkflowExecutionStatus(described.status).name if described.status else "UNKNOWN"
            view = check.TemporalView(status=status)
            if status == "COMPLETED":
                result = await client.get_workflow_handle(order, result_type=TaskResult).result()
                view.state, view.steps = str(result.state), {s.name: str(s.state) for s in result.steps}
                if order in children:
                    view.cleanup = await cleanup_of(order)
            elif status == "RUNNING":
                q = await handle.query("status", result_type=TaskStatus)
                view.state, view.steps = str(q.state), {s.name: str(s.state) for s in q.steps}
            else:
                view.cleanup = await cleanup_of(order)
            return order, view

    return dict(await asyncio.gather(*(one(o) for o in tasks)))


def demo_voids(path: Path) -> set[str]:
    """The forward keys the demo services have voided (their ledger file, read-only)."""
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    try:
        return {key for (key,) in db.execute("SELECT key FROM voids")}
    finally:
        db.close()
