"""What an activity does with a write the state store refuses for good: stop retrying it, and
tell an operator once (sas/state_store/rejections.py says which errors those are)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio.exceptions import ApplicationError

from sas.state_store.rejections import alert_refused_write, describe
from sas.task_models.errors import MIRROR_WRITE_REFUSED

log = logging.getLogger("sas.mirror")


class RefusedWrites:
    """Raises the alert for a refused write, in a transaction of its own."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    async def report(self, task_id: str, step: str | None, what: str, err: BaseException) -> None:
        try:
            async with self._sessions() as session:
                new = await alert_refused_write(session, task_id, step, what, err, datetime.now(UTC))
        except Exception as alert_err:  # noqa: BLE001 - the log line below is then all there is
            log.error(
                "task %s: the state store refused its %s write for good (%s), and the alert could not be stored "
                "either (%s)",
                task_id,
                what,
                describe(err),
                describe(alert_err),
            )
            return
        if new:
            log.error("task %s: the state store refused its %s write for good: %s", task_id, what, describe(err))

    async def refuse(self, task_id: str, step: str | None, what: str, err: BaseException) -> ApplicationError:
        """Report, and give the non-retryable error the activity raises in its place."""
        await self.report(task_id, step, what, err)
        return ApplicationError(
            f"task {task_id}: the state store refused the {what} write for good: {describe(err)}",
            type=MIRROR_WRITE_REFUSED,
            non_retryable=True,
        )
