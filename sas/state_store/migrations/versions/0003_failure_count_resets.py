"""Operator actions: an audit log, and FailureCount resets (``sas resubmit``).

Steps count their resets and decisions carry the epoch.

A reset starts FailureCount again from 0; the epoch keeps the decisions made before the
reset from colliding with the new ones on the (task, step, FailureCount, kind) key.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

from sas.state_store.tables import UTCDateTime

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("task_id", sa.String(128), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("step", sa.String(64), nullable=True),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("changed", sa.Text(), nullable=False),
        sa.Column("at", UTCDateTime(), nullable=False),
    )
    op.create_index("ux_audit_task_seq", "audit_log", ["task_id", "seq"], unique=True)
    with op.batch_alter_table("steps") as batch:
        batch.add_column(sa.Column("resets", sa.Integer(), nullable=False, server_default="0"))
    with op.batch_alter_table("decisions") as batch:
        batch.add_column(sa.Column("epoch", sa.Integer(), nullable=False, server_default="0"))
    op.drop_index("ux_decisions_task_step_count_kind", table_name="decisions")
    op.create_index(
        "ux_decisions_task_step_epoch_count_kind",
        "decisions",
        ["task_id", "step", "epoch", "failure_count", "kind"],
        unique=True,
    )


def downgrade() -> None:
    op.drop_table("audit_log")
    op.drop_index("ux_decisions_task_step_epoch_count_kind", table_name="decisions")
    op.create_index(
        "ux_decisions_task_step_count_kind", "decisions", ["task_id", "step", "failure_count", "kind"], unique=True
    )
    with op.batch_alter_table("decisions") as batch:
        batch.drop_column("epoch")
    with op.batch_alter_table("steps") as batch:
        batch.drop_column("resets")
