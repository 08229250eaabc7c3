"""Ingest generations, session stages, and the procrastinate job queue.

- segments.generation, ingest_offsets.generation/cleaned_generation: a replaced file is read
  again under a new generation; rows of older generations are then deleted.
- ingest_offsets.prefix_sha256 → fingerprint (head and tail windows, not the whole prefix).
- session_stages: durable per-session stage state (idempotency key, dead-letter state).
- procrastinate's own schema, in a PostgreSQL schema of its own (`procrastinate`), taken from
  the pinned procrastinate version. Upgrading procrastinate means adding a migration that
  applies its migration files for the versions in between.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 10:05:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from procrastinate.schema import SchemaManager
from sqlalchemy.util import await_only

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

JOBS_SCHEMA = "procrastinate"


def _execute_script(sql: str) -> None:
    # procrastinate's schema is one script of many statements (with $$ function bodies);
    # asyncpg runs such a script only through its simple-query path, on the raw connection.
    raw = op.get_bind().connection.driver_connection
    await_only(raw.execute(sql))


def upgrade() -> None:
    op.add_column(
        "segments", sa.Column("generation", sa.Integer(), server_default="1", nullable=False)
    )
    op.add_column(
        "ingest_offsets",
        sa.Column("generation", sa.Integer(), server_default="1", nullable=False),
    )
    op.add_column(
        "ingest_offsets",
        sa.Column("cleaned_generation", sa.Integer(), server_default="1", nullable=False),
    )
    op.alter_column("ingest_offsets", "prefix_sha256", new_column_name="fingerprint")
    op.create_table(
        "session_stages",
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("stage", sa.Text(), nullable=False),
        sa.Column("stage_version", sa.Integer(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("input_fingerprint", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("job_id", sa.BigInteger(), nullable=True),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("completed_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.session_id"],
            name="fk_session_stages_session_id_sessions",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_id", "stage", name="pk_session_stages"),
    )
    op.create_index("ix_session_stages_status", "session_stages", ["status"])

    op.execute(f"CREATE SCHEMA IF NOT EXISTS {JOBS_SCHEMA}")
    op.execute(f"SET LOCAL search_path TO {JOBS_SCHEMA}")
    _execute_script(SchemaManager.get_schema())
    op.execute("SET LOCAL search_path TO public")


def downgrade() -> None:
    op.execute(f"DROP SCHEMA IF EXISTS {JOBS_SCHEMA} CASCADE")
    op.drop_index("ix_session_stages_status", table_name="session_stages")
    op.drop_table("session_stages")
    op.alter_column("ingest_offsets", "fingerprint", new_column_name="prefix_sha256")
    op.drop_column("ingest_offsets", "cleaned_generation")
    op.drop_column("ingest_offsets", "generation")
    op.drop_column("segments", "generation")
