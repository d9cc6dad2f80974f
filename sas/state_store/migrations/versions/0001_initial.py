"""State store: tasks, steps, decisions, alerts.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

from sas.state_store.tables import UTCDateTime

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tasks",
        sa.Column("task_id", sa.String(128), primary_key=True),
        sa.Column("task_type", sa.String(64), nullable=False),
        sa.Column("workflow_type", sa.String(128), nullable=False),
        sa.Column("task_queue", sa.String(200), nullable=False),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("current_step", sa.String(64), nullable=True),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("shard", sa.Integer(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
    )
    op.create_index("ix_tasks_state_updated", "tasks", ["state", "updated_at"])
    op.create_table(
        "steps",
        sa.Column("task_id", sa.String(128), primary_key=True),
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("agent", sa.String(128), nullable=False),
        sa.Column("compensation", sa.String(128), nullable=True),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("locked_by", sa.String(200), nullable=True),
        sa.Column("complete_by", UTCDateTime(), nullable=True),
        sa.Column("failure_count", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("error_type", sa.String(200), nullable=True),
        sa.Column("permanent", sa.Boolean(), nullable=False),
        sa.Column("idempotency_key", sa.String(300), nullable=False),
        sa.Column("complete_by_s", sa.Float(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
    )
    op.create_index("ix_steps_state_complete_by", "steps", ["state", "complete_by"])
    op.create_table(
        "decisions",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("task_id", sa.String(128), nullable=False),
        sa.Column("step", sa.String(64), nullable=False),
        sa.Column("failure_count", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("observed_state", sa.String(32), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("decided_by", sa.String(200), nullable=False),
        sa.Column("decided_at", UTCDateTime(), nullable=False),
        sa.Column("signal_sent_at", UTCDateTime(), nullable=True),
    )
    op.create_index("ux_decisions_task_step_count", "decisions", ["task_id", "step", "failure_count"], unique=True)
    op.create_index("ix_decisions_unsent", "decisions", ["signal_sent_at"])
    op.create_table(
        "alerts",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("incident_key", sa.String(400), nullable=False, unique=True),
        sa.Column("severity", sa.String(16), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("task_id", sa.String(128), nullable=True),
        sa.Column("step", sa.String(64), nullable=True),
        sa.Column("failure_count", sa.Integer(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("suggested_action", sa.Text(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
    )
    op.create_index("ix_alerts_status", "alerts", ["status", "created_at"])


def downgrade() -> None:
    op.drop_table("alerts")
    op.drop_table("decisions")
    op.drop_table("steps")
    op.drop_table("tasks")
