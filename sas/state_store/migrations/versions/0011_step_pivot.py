"""Step pivots: where a step stands to its task type's point of no return.

``steps.pivot`` is ``pivot`` for the task type's pivot, ``forward_only`` for a step after it,
NULL before it (and for every task type without a pivot, and every row written before). It is
written once, at accept, from the accepted plan; the Supervisor's policy reads it to retry and
park, never compensate, a step past the pivot (``supervisor/decide/policy.py``), and ``sas show``
shows it.

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("steps") as batch:
        batch.add_column(sa.Column("pivot", sa.String(16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("steps") as batch:
        batch.drop_column("pivot")
