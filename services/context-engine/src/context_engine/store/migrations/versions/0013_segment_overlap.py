"""Overlapped speech (ADR 0025): who else talked during a segment, and when, as the audio
pipeline's overlap-aware diarizer heard it (`overlap` of the transcript contract), kept beside
the segment so the API can show it.

A JSON list of `{speaker, start, end}` (seconds from session start); NULL when nobody talked
over the segment (the JSONL line leaves the field out then), so existing rows need no rewrite.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("segments", sa.Column("overlap", JSONB(), nullable=True))


def downgrade() -> None:
    op.drop_column("segments", "overlap")
