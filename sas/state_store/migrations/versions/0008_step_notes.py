"""Step notes: why a step was Skipped, or what a Waiting step waits for and until when.

``steps.note`` is written by the one writer (``sas.state_store.mirror_rules``) from
``StepTransition.note``; a transition without one leaves it as it was. ``sas show`` shows it.

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("steps") as batch:
        batch.add_column(sa.Column("note", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("steps") as batch:
        batch.drop_column("note")
