"""Which run of a task wrote each row, and which chain of runs owns the task.

A task id is one task, forever: the first run's ``first_execution_run_id`` (the
*chain*; a reset or continue-as-new keeps it) is recorded when the task is accepted,
and every later write names its chain and run. A write from another chain (the id
reused with ``temporal workflow start``) is refused. ``incarnation`` counts explicit
resubmissions of a finished task (``sas resubmit``), each a new chain with its own
idempotency keys; earlier incarnations are kept in ``task_archive``.

The audit log is keyed by (task, run, seq): after a reset the new run numbers its
transitions from the reset point again, and must not collide with the old run's.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

from sas.state_store.tables import UTCDateTime

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("chain_id", sa.String(64), nullable=True))
        batch.add_column(sa.Column("run_id", sa.String(64), nullable=True))
        batch.add_column(sa.Column("incarnation", sa.Integer(), nullable=False, server_default="1"))
    with op.batch_alter_table("steps") as batch:
        batch.add_column(sa.Column("chain_id", sa.String(64), nullable=True))
        batch.add_column(sa.Column("run_id", sa.String(64), nullable=True))
    with op.batch_alter_table("audit_log") as batch:
        batch.add_column(sa.Column("run_id", sa.String(64), nullable=False, server_default=""))
    op.drop_index("ux_audit_task_seq", table_name="audit_log")
    op.create_index("ux_audit_task_run_seq", "audit_log", ["task_id", "run_id", "seq"], unique=True)
    op.create_index("ix_audit_task_at", "audit_log", ["task_id", "at"])
    op.create_table(
        "task_archive",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("task_id", sa.String(128), nullable=False),
        sa.Column("incarnation", sa.Integer(), nullable=False),
        sa.Column("chain_id", sa.String(64), nullable=True),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("snapshot", sa.JSON(), nullable=False),
        sa.Column("archived_at", UTCDateTime(), nullable=False),
    )
    op.create_index("ux_task_archive_task_incarnation", "task_archive", ["task_id", "incarnation"], unique=True)


def downgrade() -> None:
    op.drop_table("task_archive")
    op.drop_index("ix_audit_task_at", table_name="audit_log")
    op.drop_index("ux_audit_task_run_seq", table_name="audit_log")
    op.create_index("ux_audit_task_seq", "audit_log", ["task_id", "seq"], unique=True)
    with op.batch_alter_table("audit_log") as batch:
        batch.drop_column("run_id")
    with op.batch_alter_table("steps") as batch:
        batch.drop_column("run_id")
        batch.drop_column("chain_id")
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("incarnation")
        batch.drop_column("run_id")
        batch.drop_column("chain_id")
