"""The state store's tables: the Supervisor's decisions, alerts, the audit log, attempts, breakers.

The mirror's own two tables, ``tasks`` and ``steps``, are in ``mirror_tables``: only their
one writer (``mirror_rules``) and the state store's reads may import them (pyproject's
import-linter contracts). Timestamps are timezone-aware UTC in Python on both backends (see
``UTCDateTime``).
"""

from __future__ import annotations

import zlib
from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import JSON, BigInteger, DateTime, Float, Index, Integer, String, Text, TypeDecorator
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes on both backends.

    SQLite has no time zone type, so values are stored as naive UTC there; the
    fixed ISO format keeps ``<`` comparisons in the Supervisor's query correct.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the state store; use an aware UTC datetime")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


SHARD_BUCKETS = 4096


def shard_of(task_id: str) -> int:
    """Stable bucket of a task id; a Supervisor shard owns a contiguous range of buckets."""
    return zlib.crc32(task_id.encode()) % SHARD_BUCKETS


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {datetime: UTCDateTime(), dict[str, Any]: JSON()}


class Decision(Base):
    """One Supervisor (or operator) decision. The unique key makes every action happen once."""

    __tablename__ = "decisions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    task_id: Mapped[str] = mapped_column(String(128))
    step: Mapped[str] = mapped_column(String(64))
    failure_count: Mapped[int] = mapped_column(Integer, doc="FailureCount after this decision.")
    kind: Mapped[str] = mapped_column(String(32), doc="retry | compensate | park")
    epoch: Mapped[int] = mapped_column(Integer, default=0, doc="The step's FailureCount resets when decided.")
    observed_state: Mapped[str] = mapped_column(String(32))
    reason: Mapped[str] = mapped_column(Text)
    decided_by: Mapped[str] = mapped_column(String(200))
    decided_at: Mapped[datetime]
    signal_sent_at: Mapped[datetime | None]

    __table_args__ = (
        # One decision of each kind per (task, step, FailureCount): the "never acts twice" key.
        Index(
            "ux_decisions_task_step_epoch_count_kind", "task_id", "step", "epoch", "failure_count", "kind", unique=True
        ),
        Index("ix_decisions_unsent", "signal_sent_at"),
    )


class Alert(Base):
    """An operator alert: one row per incident, however many sweeps see it."""

    __tablename__ = "alerts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    incident_key: Mapped[str] = mapped_column(String(400), unique=True)
    severity: Mapped[str] = mapped_column(String(16))
    kind: Mapped[str] = mapped_column(String(64))
    task_id: Mapped[str | None] = mapped_column(String(128))
    step: Mapped[str | None] = mapped_column(String(64))
    failure_count: Mapped[int] = mapped_column(Integer, default=0)
    message: Mapped[str] = mapped_column(Text)
    last_error: Mapped[str | None] = mapped_column(Text)
    suggested_action: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16), default="open")
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    resolved_at: Mapped[datetime | None]
    resolution: Mapped[str | None] = mapped_column(
        Text, doc="Why it closed itself (the task recovered, pollers returned)."
    )
    delivered_at: Mapped[datetime | None] = mapped_column(doc="Webhook outbox: set once delivered (or given up).")
    delivery_attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_delivery_at: Mapped[datetime | None]

    __table_args__ = (
        Index("ix_alerts_status", "status", "created_at"),
        Index("ix_alerts_undelivered", "delivered_at", "next_delivery_at"),
        Index("ix_alerts_task", "task_id"),
    )


class AuditEntry(Base):
    """An operator's action on a task: who, when, why, and what it changed."""

    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    task_id: Mapped[str] = mapped_column(String(128))
    run_id: Mapped[str] = mapped_column(String(64), default="", doc="The run that applied the action.")
    seq: Mapped[int] = mapped_column(
        Integer, doc="The run's transition number: (task, run, seq) makes the write idempotent."
    )
    step: Mapped[str | None] = mapped_column(String(64))
    action: Mapped[str] = mapped_column(String(32), doc="retry | resubmit | compensate")
    actor: Mapped[str] = mapped_column(String(200))
    reason: Mapped[str] = mapped_column(Text)
    changed: Mapped[str] = mapped_column(Text)
    at: Mapped[datetime]
    decision_id: Mapped[int | None] = mapped_column(
        Integer, default=None, doc="The Supervisor decision this entry carried out; each vouches for one entry."
    )

    __table_args__ = (
        Index("ux_audit_task_run_seq", "task_id", "run_id", "seq", unique=True),
        Index("ux_audit_decision", "decision_id", unique=True),
        Index("ix_audit_task_at", "task_id", "at"),
    )


class TaskArchive(Base):
    """A finished incarnation of a task, kept when `sas resubmit` starts the next one."""

    __tablename__ = "task_archive"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    task_id: Mapped[str] = mapped_column(String(128))
    incarnation: Mapped[int] = mapped_column(Integer)
    chain_id: Mapped[str | None] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(32))
    snapshot: Mapped[dict[str, Any]] = mapped_column(doc="The task row and its step rows as they were.")
    archived_at: Mapped[datetime]

    __table_args__ = (Index("ux_task_archive_task_incarnation", "task_id", "incarnation", unique=True),)


class StepAttempt(Base):
    """One attempt of an Agent, kept: the LockedBy and CompleteBy it had. The step row holds
    only the current attempt's; this row is written with it, in the same transaction."""

    __tablename__ = "step_attempts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    task_id: Mapped[str] = mapped_column(String(128))
    step: Mapped[str] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(32), doc="Processing (the step) or Compensating (its undo).")
    attempt: Mapped[int] = mapped_column(Integer, doc="Temporal's attempt number.")
    failure_count: Mapped[int] = mapped_column(Integer, doc="The step's FailureCount when the attempt started.")
    locked_by: Mapped[str | None] = mapped_column(String(200))
    complete_by: Mapped[datetime | None]
    started_at: Mapped[datetime]
    version: Mapped[int] = mapped_column(BigInteger, doc="The Agent's write: (task, step, version) is one attempt.")
    chain_id: Mapped[str | None] = mapped_column(String(64), doc="The chain of runs (incarnation) it belongs to.")
    run_id: Mapped[str | None] = mapped_column(String(64))

    __table_args__ = (
        Index("ux_step_attempts_task_step_version", "task_id", "step", "version", unique=True),
        Index("ix_step_attempts_task_started", "task_id", "started_at"),
    )


class Breaker(Base):
    """One remote service's circuit breaker, shared by every worker (sas/breaker/service.py).

    Workers count their own calls and write here only on a transition (closed -> open, open ->
    half-open with the probe's owner, half-open -> closed or open again) or when an operator
    forces it; each reads the row every few seconds. Every transition is a compare-and-set on
    ``version``, so two workers that see the same thing make one transition."""

    __tablename__ = "breakers"

    service: Mapped[str] = mapped_column(String(40), primary_key=True)
    state: Mapped[str] = mapped_column(String(16), doc="closed | open | half_open")
    since: Mapped[datetime] = mapped_column(doc="When it entered this state.")
    outage_since: Mapped[datetime | None] = mapped_column(
        doc="When the outage began: the first opening, kept while probes fail (max_hold_s counts from here)."
    )
    hold_until: Mapped[datetime | None] = mapped_column(
        doc="Until when this outage holds the service's work (its start + max_hold_s of the worker that opened it);"
        " None while forced open: until forced closed. Every reader judges by it, with no settings of its own."
    )
    retry_at: Mapped[datetime | None] = mapped_column(doc="Open: when the next probe may go.")
    probe_by: Mapped[str | None] = mapped_column(String(200), doc="Half-open: the worker that sends the probe.")
    probe_until: Mapped[datetime | None] = mapped_column(doc="Half-open: another worker may probe after this.")
    calls: Mapped[int] = mapped_column(Integer, default=0, doc="Calls in the window that opened it.")
    failures: Mapped[int] = mapped_column(Integer, default=0, doc="Of those, failed.")
    last_error: Mapped[str | None] = mapped_column(Text)
    forced_by: Mapped[str | None] = mapped_column(
        String(200), doc="An operator who forced it open: no probe, no time limit, until forced closed."
    )
    version: Mapped[int] = mapped_column(BigInteger, default=0)
    updated_at: Mapped[datetime]
    # The staged release of the work it held, after it closed (sas/breaker/release.py). Times are
    # the state store's clock in seconds since the epoch, as the rate limits' are: every worker
    # computes the same allowance from them. Counted without a new version: they are not transitions.
    release_since: Mapped[float | None] = mapped_column(Float, doc="When the release began; None: none under way.")
    release_waves_at: Mapped[float | None] = mapped_column(
        Float, doc="When its waves began, once its canaries answered; None while they have not."
    )
    release_let: Mapped[int] = mapped_column(Integer, default=0, doc="Calls the release has let through.")
    release_ok: Mapped[int] = mapped_column(Integer, default=0, doc="Its canaries that answered.")


class BreakerWindow(Base):
    """A worker's recent calls to one service (its counting window), written at most once per
    sync and only when it made calls: what ``sas services`` shows as the failure rate."""

    __tablename__ = "breaker_windows"

    service: Mapped[str] = mapped_column(String(40), primary_key=True)
    worker: Mapped[str] = mapped_column(String(200), primary_key=True)
    calls: Mapped[int] = mapped_column(Integer, default=0)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    updated_at: Mapped[datetime]
