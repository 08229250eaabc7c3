"""segment_vectors indexed by (space, session_id) instead of space alone (issue 6).

An embed run looks up one session's vectors in one space. While the table's statistics are
stale (a space filling fast, before autovacuum analyses it) PostgreSQL chose the `space`-only
index for that lookup and scanned every row of the space once per segment (measured: 88 ms a
session at 10k rows, growing linearly). With (space, session_id) any plan the planner picks
reads only the session's rows; counts per space still use the index prefix.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22 10:05:00
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_segment_vectors_space_session", "segment_vectors", ["space", "session_id"])
    op.drop_index("ix_segment_vectors_space", table_name="segment_vectors")


def downgrade() -> None:
    op.create_index("ix_segment_vectors_space", "segment_vectors", ["space"])
    op.drop_index("ix_segment_vectors_space_session", table_name="segment_vectors")
