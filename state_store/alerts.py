"""Operator alerts: listed, acknowledged and resolved."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from state_store.tables import Alert

ALERT_STATUSES = ("open", "acked", "resolved")


async def list_alerts(session: AsyncSession, status: str | None = None, limit: int = 100) -> list[Alert]:
    query = select(Alert).order_by(Alert.id.desc()).limit(limit)
    if status is not None:
        query = query.where(Alert.status == status)
    return list((await session.scalars(query)).all())


async def set_alert_status(session: AsyncSession, alert_id: int, status: str, at: datetime) -> bool:
    if status not in ALERT_STATUSES:
        raise ValueError(f"unknown alert status {status!r}; use one of {', '.join(ALERT_STATUSES)}")
    async with session.begin():
        result = await session.execute(update(Alert).where(Alert.id == alert_id).values(status=status, updated_at=at))
    return bool(result.rowcount)
