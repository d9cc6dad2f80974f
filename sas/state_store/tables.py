"""The state store's tables: the pattern's task and step records, the Supervisor's decisions, alerts.

Timestamps are timezone-aware UTC in Python on both backends (see ``UTCDateTime``).
"""

from __future__ import annotations

import zlib
from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import JSON, BigInteger, Boolean, DateTime, Index, Integer, String, Text, TypeDecorator
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


def _step_shard(context: Any) -> int:
    # Filled in on insert, so every ORM writer of step rows gets it without knowing about shards.
    return shard_of(context.get_current_parameters()["task_id"])


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {datetime: UTCDateTime(), dict[str, Any]: JSON()}


class Task(Base):
    """One task (an order): written with its steps in one transaction when the Scheduler accepts it."""

    __tablename__ = "tasks"

    task_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    task_type: Mapped[str] = mapped_column(String(64))
    workflow_type: Mapped[str] = mapped_column(String(128))
    task_queue: Mapped[str] = mapped_column(String(200))
    state: Mapped[str] = mapped_column(String(32))
    current_step: Mapped[str | None] = mapped_column(String(64))
    payload: Mapped[dict[str, Any]]
    shard: Mapped[int] = mapped_column(Integer, doc="Stable hash bucket of task_id, for sharded Supervisors.")
    version: Mapped[int] = mapped_column(BigInteger, default=0)
    chain_id: Mapped[str | None] = mapped_column(
        String(64), doc="first_execution_run_id of the runs that own this task: a reset or continue-as-new keeps it."
    )
    run_id: Mapped[str | None] = mapped_column(String(64), doc="The run that wrote the row last.")
    incarnation: Mapped[int] = mapped_column(
        Integer, default=1, doc="1, then +1 for each `sas resubmit` of a finished task."
    )
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]

    __table_args__ = (Index("ix_tasks_state_updated", "state", "updated_at"),)


class Step(Base):
    """The pattern's per-step record: ProcessState, LockedBy, CompleteBy, FailureCount."""

    __tablename__ = "steps"

    task_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    position: Mapped[int] = mapped_column(Integer)
    agent: Mapped[str] = mapped_column(String(128))
    compensation: Mapped[str | None] = mapped_column(String(128))
    state: Mapped[str] = mapped_column(String(32))
    locked_by: Mapped[str | None] = mapped_column(String(200), doc="Identity of the agent process running the attempt.")
    complete_by: Mapped[datetime | None] = mapped_column(doc="When the current attempt's start-to-close runs out.")
    failure_count: Mapped[int] = mapped_column(Integer, default=0)
    resets: Mapped[int] = mapped_column(Integer, default=0, doc="Times an operator reset FailureCount (sas resubmit).")
    attempt: Mapped[int] = mapped_column(Integer, default=0, doc="Temporal's attempt number of the current run.")
    last_error: Mapped[str | None] = mapped_column(Text)
    error_type: Mapped[str | None] = mapped_column(String(200))
    permanent: Mapped[bool] = mapped_column(Boolean, default=False)
    idempotency_key: Mapped[str] = mapped_column(String(300))
    complete_by_s: Mapped[float] = mapped_column(doc="The step's complete-by, to extend CompleteBy by.")
    result: Mapped[dict[str, Any] | None] = mapped_column(
        JSON, doc="The forward result (task_models.results) without its secret fields; set with Processed."
    )
    version: Mapped[int] = mapped_column(BigInteger, default=0, doc="Orders writes: an older one never wins.")
    chain_id: Mapped[str | None] = mapped_column(String(64), doc="The owning chain of runs (as tasks.chain_id).")
    run_id: Mapped[str | None] = mapped_column(String(64), doc="The run that wrote the row last.")
    updated_at: Mapped[datetime]
    shard: Mapped[int | None] = mapped_column(
        Integer, default=_step_shard, doc="The task's hash bucket (0..4095): a Supervisor shard scans a range."
    )

    # The Supervisor's scan: WHERE state = ? AND complete_by < ? ORDER BY complete_by LIMIT n.
    __table_args__ = (Index("ix_steps_state_complete_by", "state", "complete_by"),)


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

    __table_args__ = (
        Index("ux_audit_task_run_seq", "task_id", "run_id", "seq", unique=True),
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
