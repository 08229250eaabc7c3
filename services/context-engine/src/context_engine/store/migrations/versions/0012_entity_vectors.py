"""Entity vectors beside segment vectors (design Layer 5: "segments and entities embedded"):
which entity has a vector in which space, and of which document (a changed document is
embedded again).

`entity_id` has no foreign key on purpose: when an entity is deleted (a forget, an orphan),
its row stays until the vector point is deleted too, so nothing in the index outlives the
entity unnoticed (entity_embedding.py, `drop_orphans`).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "entity_vectors",
        sa.Column("entity_id", sa.BigInteger(), nullable=False),
        sa.Column("space", sa.Text(), nullable=False),
        sa.Column("text_sha", sa.Text(), nullable=False),
        sa.Column(
            "embedded_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.ForeignKeyConstraint(
            ["space"],
            ["vector_spaces.space"],
            name="fk_entity_vectors_space_vector_spaces",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("entity_id", "space", name="pk_entity_vectors"),
    )


def downgrade() -> None:
    op.drop_table("entity_vectors")
