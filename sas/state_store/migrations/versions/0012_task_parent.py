"""Task parents: the task whose child step (``ChildTask``) started a task, and that step.

Written once, at accept, from the link the parent gives its child (``TaskAccepted.parent``);
``sas show`` reads it both ways (the child's parent; a parent's children, by the index), and a
clean-up that a parent starts for its completed child is authorised by it
(``activities/cleanup_plans.py``). NULL for every task that is no child, and every row written before.

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("parent_task_id", sa.String(128), nullable=True))
        batch.add_column(sa.Column("parent_step", sa.String(64), nullable=True))
    op.create_index("ix_tasks_parent", "tasks", ["parent_task_id"])


def downgrade() -> None:
    op.drop_index("ix_tasks_parent", table_name="tasks")
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("parent_step")
        batch.drop_column("parent_task_id")
