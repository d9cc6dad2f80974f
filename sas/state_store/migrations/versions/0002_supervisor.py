"""Supervisor: step shards, decisions keyed by kind too, alert resolution and webhook outbox.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

from sas.state_store.tables import UTCDateTime

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("steps") as batch:
        batch.add_column(sa.Column("shard", sa.Integer(), nullable=True))
    op.execute("UPDATE steps SET shard = (SELECT tasks.shard FROM tasks WHERE tasks.task_id = steps.task_id)")

    op.drop_index("ux_decisions_task_step_count", table_name="decisions")
    op.create_index(
        "ux_decisions_task_step_count_kind", "decisions", ["task_id", "step", "failure_count", "kind"], unique=True
    )

    with op.batch_alter_table("alerts") as batch:
        batch.add_column(sa.Column("resolved_at", UTCDateTime(), nullable=True))
        batch.add_column(sa.Column("resolution", sa.Text(), nullable=True))
        batch.add_column(sa.Column("delivered_at", UTCDateTime(), nullable=True))
        batch.add_column(sa.Column("delivery_attempts", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("next_delivery_at", UTCDateTime(), nullable=True))
    # Alerts raised before the webhook existed are not sent now.
    op.execute("UPDATE alerts SET delivered_at = updated_at")
    op.create_index("ix_alerts_undelivered", "alerts", ["delivered_at", "next_delivery_at"])
    op.create_index("ix_alerts_task", "alerts", ["task_id"])


def downgrade() -> None:
    op.drop_index("ix_alerts_task", table_name="alerts")
    op.drop_index("ix_alerts_undelivered", table_name="alerts")
    with op.batch_alter_table("alerts") as batch:
        for column in ("next_delivery_at", "delivery_attempts", "delivered_at", "resolution", "resolved_at"):
            batch.drop_column(column)
    op.drop_index("ux_decisions_task_step_count_kind", table_name="decisions")
    op.create_index("ux_decisions_task_step_count", "decisions", ["task_id", "step", "failure_count"], unique=True)
    with op.batch_alter_table("steps") as batch:
        batch.drop_column("shard")
