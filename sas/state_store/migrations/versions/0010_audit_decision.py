"""The decision an audit entry carried out: each Supervisor decision vouches for one request.

``audit_log.decision_id`` is set when a request is recorded as the Supervisor's: its decision
exists for the task, is of the request's kind and step, and has not vouched for another entry
(the unique index makes that last check hold under concurrent writers too).

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("audit_log") as batch:
        batch.add_column(sa.Column("decision_id", sa.Integer(), nullable=True))
        batch.create_index("ux_audit_decision", ["decision_id"], unique=True)


def downgrade() -> None:
    with op.batch_alter_table("audit_log") as batch:
        batch.drop_index("ux_audit_decision")
        batch.drop_column("decision_id")
