"""Every attempt's LockedBy and CompleteBy, kept: the step row holds only the
current attempt's. The Agent writes one row per attempt it starts, in the same transaction
as its Processing (or Compensating) write.

Revision ID: 0006
Revises: 0005 (written on another branch at the same time; it adds the steps' result column)
"""

import sqlalchemy as sa
from alembic import op

from sas.state_store.tables import UTCDateTime

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "step_attempts",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("task_id", sa.String(128), nullable=False),
        sa.Column("step", sa.String(64), nullable=False),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("failure_count", sa.Integer(), nullable=False),
        sa.Column("locked_by", sa.String(200), nullable=True),
        sa.Column("complete_by", UTCDateTime(), nullable=True),
        sa.Column("started_at", UTCDateTime(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("chain_id", sa.String(64), nullable=True),
        sa.Column("run_id", sa.String(64), nullable=True),
    )
    op.create_index("ux_step_attempts_task_step_version", "step_attempts", ["task_id", "step", "version"], unique=True)
    op.create_index("ix_step_attempts_task_started", "step_attempts", ["task_id", "started_at"])


def downgrade() -> None:
    op.drop_table("step_attempts")
