"""Segments by speaker (issue 6): the vector leg reads the distinct speaker names with a skip
scan of this index to take them out of queries (speakers.py, ADR 0012).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-22 14:30:00
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_segments_speaker", "segments", ["speaker"])


def downgrade() -> None:
    op.drop_index("ix_segments_speaker", table_name="segments")
