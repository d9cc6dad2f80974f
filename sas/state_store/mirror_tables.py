"""The mirror's two tables: ``tasks`` and ``steps``, the pattern's task and step records.

Only ``sas.state_store.mirror_rules`` (the one writer) and the state store's reads import this
module - an import-linter contract in pyproject says so. Everything else reads rows through
``sas.state_store.queries`` (typed as the read-only ``TaskRow``/``StepRow``) and writes them
through ``sas.state_store.mirror``/``sas.state_store.agent_writes``, which run ``mirror_rules``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from sas.state_store.tables import Base, shard_of


def _step_shard(context: Any) -> int:
    # Filled in on insert, so every ORM writer of step rows gets it without knowing about shards.
    return shard_of(context.get_current_parameters()["task_id"])


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
    parent_task_id: Mapped[str | None] = mapped_column(
        String(128), doc="The task whose child step started this one (ChildTask); NULL: none."
    )
    parent_step: Mapped[str | None] = mapped_column(String(64), doc="That parent's step.")
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]

    __table_args__ = (
        Index("ix_tasks_state_updated", "state", "updated_at"),
        Index("ix_tasks_parent", "parent_task_id"),
    )


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
    note: Mapped[str | None] = mapped_column(
        Text, doc="Why the step was Skipped, or what a Waiting step waits for and until when."
    )
    pivot: Mapped[str | None] = mapped_column(
        String(16), doc="pivot: the task type's point of no return; forward_only: a step after it; NULL: before it."
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
