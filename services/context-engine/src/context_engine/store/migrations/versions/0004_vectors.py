"""Vector spaces and which segments have vectors in them; entities by name (issue 6).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22 16:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "vector_spaces",
        sa.Column("space", sa.Text(), nullable=False),
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("dim", sa.Integer(), nullable=False),
        sa.Column("status", sa.Text(), server_default="building", nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("ready_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("space", name="pk_vector_spaces"),
    )
    op.create_table(
        "segment_vectors",
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("segment_id", sa.Text(), nullable=False),
        sa.Column("space", sa.Text(), nullable=False),
        sa.Column("text_sha", sa.Text(), nullable=False),
        sa.Column(
            "embedded_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["session_id", "segment_id"],
            ["segments.session_id", "segments.segment_id"],
            name="fk_segment_vectors_segment",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["space"],
            ["vector_spaces.space"],
            name="fk_segment_vectors_space_vector_spaces",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_id", "segment_id", "space", name="pk_segment_vectors"),
    )
    op.create_index("ix_segment_vectors_space", "segment_vectors", ["space"])
    op.create_index("ix_entities_canonical_name", "entities", ["canonical_name"])


def downgrade() -> None:
    op.drop_index("ix_entities_canonical_name", table_name="entities")
    op.drop_index("ix_segment_vectors_space", table_name="segment_vectors")
    op.drop_table("segment_vectors")
    op.drop_table("vector_spaces")
