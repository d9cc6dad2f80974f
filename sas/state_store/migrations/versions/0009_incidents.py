"""Incidents: one alert for every task failing for one cause.

``incidents`` holds an incident alert's cause, counts and times; ``incident_tasks`` its member
tasks (``sas.state_store.incident_tables``). A member's own alerts are folded into the incident
while it is open: they are neither listed by default nor sent to the webhook.

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

from sas.state_store.tables import UTCDateTime

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "incidents",
        sa.Column("alert_id", sa.Integer(), sa.ForeignKey("alerts.id"), primary_key=True),
        sa.Column("cause_key", sa.String(64), nullable=False),
        sa.Column("service", sa.String(64), nullable=True),
        sa.Column("step", sa.String(64), nullable=False),
        sa.Column("error_type", sa.String(200), nullable=True),
        sa.Column("error_text", sa.Text(), nullable=False),
        sa.Column("task_count", sa.Integer(), nullable=False),
        sa.Column("parked", sa.Integer(), nullable=False),
        sa.Column("first_at", UTCDateTime(), nullable=False),
        sa.Column("latest_at", UTCDateTime(), nullable=False),
        sa.Column("next_look_at", UTCDateTime(), nullable=True),
        sa.Column("sample", sa.JSON(), nullable=False),
        sa.Column("delivered_count", sa.Integer(), nullable=False),
    )
    op.create_table(
        "incident_tasks",
        sa.Column("alert_id", sa.Integer(), sa.ForeignKey("alerts.id"), primary_key=True),
        sa.Column("task_id", sa.String(128), primary_key=True),
        sa.Column("step", sa.String(64), nullable=False),
        sa.Column("joined_at", UTCDateTime(), nullable=False),
    )
    op.create_index("ix_incident_tasks_task", "incident_tasks", ["task_id", "step"])


def downgrade() -> None:
    op.drop_index("ix_incident_tasks_task", table_name="incident_tasks")
    op.drop_table("incident_tasks")
    op.drop_table("incidents")
