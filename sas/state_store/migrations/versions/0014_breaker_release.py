"""The staged release of a breaker's held work: when it began, when its waves did, the calls it
let through and the canaries that answered (sas/breaker/release.py).

Revision ID: 0014
Revises: 0013
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("breakers") as batch:
        batch.add_column(sa.Column("release_since", sa.Float(), nullable=True))
        batch.add_column(sa.Column("release_waves_at", sa.Float(), nullable=True))
        batch.add_column(sa.Column("release_let", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("release_ok", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("breakers") as batch:
        for name in ("release_ok", "release_let", "release_waves_at", "release_since"):
            batch.drop_column(name)
