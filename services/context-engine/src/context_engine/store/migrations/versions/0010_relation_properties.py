"""Relation properties (issue 23, ADR 0017): a relation's category, the date its words resolve
to and the rule that found it, stored beside the triple so the graph stage can write them.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "extracted_relations",
        sa.Column("properties", JSONB(), nullable=False, server_default="{}"),
    )


def downgrade() -> None:
    op.drop_column("extracted_relations", "properties")
