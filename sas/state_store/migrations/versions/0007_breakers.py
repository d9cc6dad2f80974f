"""Circuit breakers shared by every worker: one row per remote service, and
each worker's recent call counts per service.

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

from sas.state_store.tables import UTCDateTime

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "breakers",
        sa.Column("service", sa.String(40), primary_key=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("since", UTCDateTime(), nullable=False),
        sa.Column("outage_since", UTCDateTime(), nullable=True),
        sa.Column("hold_until", UTCDateTime(), nullable=True),
        sa.Column("retry_at", UTCDateTime(), nullable=True),
        sa.Column("probe_by", sa.String(200), nullable=True),
        sa.Column("probe_until", UTCDateTime(), nullable=True),
        sa.Column("calls", sa.Integer(), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("forced_by", sa.String(200), nullable=True),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
    )
    op.create_table(
        "breaker_windows",
        sa.Column("service", sa.String(40), primary_key=True),
        sa.Column("worker", sa.String(200), primary_key=True),
        sa.Column("calls", sa.Integer(), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("breaker_windows")
    op.drop_table("breakers")
