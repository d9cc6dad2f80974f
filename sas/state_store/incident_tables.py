"""The incidents' tables: what one incident is about, and which tasks are in it.

An incident is an operator alert (``alerts`` row, kind ``incident``) that stands for every task
failing for one cause (``supervisor/decide/causes.py``). ``incidents`` holds what the alert row has no
column for; ``incident_tasks`` is the incident's membership, which ``sas retry --incident ID``
acts on and which folds the member tasks' own alerts into the incident.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from sas.state_store.tables import Base


class Incident(Base):
    """One cause's incident, beside its alert row (same id)."""

    __tablename__ = "incidents"

    alert_id: Mapped[int] = mapped_column(Integer, ForeignKey("alerts.id"), primary_key=True)
    cause_key: Mapped[str] = mapped_column(String(64), doc="sas.supervisor.decide.causes.Cause.key")
    service: Mapped[str | None] = mapped_column(String(64))
    step: Mapped[str] = mapped_column(String(64))
    error_type: Mapped[str | None] = mapped_column(String(200))
    error_text: Mapped[str] = mapped_column(Text, doc="The normalised error text shared by its tasks.")
    task_count: Mapped[int] = mapped_column(Integer, default=0)
    parked: Mapped[int] = mapped_column(Integer, default=0, doc="Of them, parked for an operator (Error).")
    first_at: Mapped[datetime] = mapped_column(doc="The earliest failure of a task in it.")
    latest_at: Mapped[datetime] = mapped_column(doc="The latest failure of a task in it.")
    next_look_at: Mapped[datetime | None] = mapped_column(doc="The Supervisor's next look at one of its tasks.")
    sample: Mapped[list[str]] = mapped_column(JSON, doc="A few of its task ids, oldest failure first.")
    delivered_count: Mapped[int] = mapped_column(
        Integer, default=0, doc="The task count last sent to the webhook: a doubling is a change worth a delivery."
    )


class IncidentTask(Base):
    """A task in an incident: from when its step first failed for the cause until it moves on."""

    __tablename__ = "incident_tasks"

    alert_id: Mapped[int] = mapped_column(Integer, ForeignKey("alerts.id"), primary_key=True)
    task_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    step: Mapped[str] = mapped_column(String(64))
    joined_at: Mapped[datetime]

    __table_args__ = (Index("ix_incident_tasks_task", "task_id", "step"),)
