"""The services' rate limits shared by every worker: a row per permit of each limited service
(sas/state_store/rate_limits.py).

Revision ID: 0013
Revises: 0012
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rate_leases",
        sa.Column("service", sa.String(40), primary_key=True),
        sa.Column("slot", sa.Integer(), primary_key=True),
        sa.Column("holder", sa.String(64), nullable=True),
        sa.Column("free_at", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("rate_leases")
