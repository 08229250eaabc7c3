"""The chronicler (issue 8): event_offsets, how far each events JSONL file has been read.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "event_offsets",
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("offset", sa.BigInteger(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("fingerprint", sa.Text(), nullable=False),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("path", name="pk_event_offsets"),
    )


def downgrade() -> None:
    op.drop_table("event_offsets")
