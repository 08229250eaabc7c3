"""Statements (issue 36): what each clause said about a person, kept beside the relations and
merged by meaning when read (knowledge/statement_facts.py).

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-28 10:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "statements",
        sa.Column("id", sa.BigInteger(), primary_key=True, autoincrement=True),
        sa.Column(
            "session_id",
            sa.Text(),
            sa.ForeignKey("sessions.session_id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("segment_id", sa.Text(), nullable=True),
        sa.Column("speaker", sa.Text(), nullable=False, server_default=""),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("subject_key", sa.Text(), nullable=False),
        sa.Column("predicate", sa.Text(), nullable=False),
        sa.Column("object", sa.Text(), nullable=False, server_default=""),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False, server_default="fact"),
        sa.Column("confidence", sa.Float(), nullable=False, server_default="0"),
        sa.Column("valid_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("said_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("evidence", sa.Text(), nullable=False, server_default=""),
        sa.Column("extractor", sa.Text(), nullable=False),
        sa.Column("extractor_version", sa.Integer(), nullable=False, server_default="1"),
        sa.Column("current", sa.Boolean(), nullable=False, server_default=sa.true()),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
    )
    op.create_index("ix_statements_session", "statements", ["session_id", "extractor", "current"])
    op.create_index("ix_statements_subject", "statements", ["subject_key", "current"])


def downgrade() -> None:
    op.drop_index("ix_statements_subject", table_name="statements")
    op.drop_index("ix_statements_session", table_name="statements")
    op.drop_table("statements")
