"""Step results: what each step's Agent got back from its service (task_models.results).

``steps.result`` holds the forward result as JSON, without the fields its model marks
``Secret``. The Agent writes it with the step's Processed write, in the same statement. It is
shown by ``sas show``; it is not a search attribute.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("steps") as batch:
        batch.add_column(sa.Column("result", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("steps") as batch:
        batch.drop_column("result")
