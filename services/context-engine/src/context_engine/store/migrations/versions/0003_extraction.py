"""Extraction (issue 5): versioned mentions, relations, runs, contradictions.

- entity_mentions: name, properties, sensitivity, extractor_version, current (false = output of
  an older extractor version, kept as history); segment_id may be NULL (no segment matched).
- entities: sensitivity, contradicted_at.
- extracted_relations, extraction_runs, entity_contradictions: new.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 14:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def _now() -> sa.TextClause:
    return sa.text("now()")


def upgrade() -> None:
    op.add_column(
        "entities", sa.Column("sensitivity", sa.Text(), server_default="open", nullable=False)
    )
    op.add_column("entities", sa.Column("contradicted_at", sa.DateTime(timezone=True)))

    op.alter_column("entity_mentions", "segment_id", existing_type=sa.Text(), nullable=True)
    op.add_column(
        "entity_mentions", sa.Column("name", sa.Text(), server_default="", nullable=False)
    )
    op.add_column(
        "entity_mentions",
        sa.Column(
            "properties",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default="{}",
            nullable=False,
        ),
    )
    op.add_column(
        "entity_mentions",
        sa.Column("sensitivity", sa.Text(), server_default="open", nullable=False),
    )
    op.add_column(
        "entity_mentions",
        sa.Column("extractor_version", sa.Integer(), server_default="1", nullable=False),
    )
    op.add_column(
        "entity_mentions",
        sa.Column("current", sa.Boolean(), server_default="true", nullable=False),
    )
    op.create_index(
        "ix_entity_mentions_session_extractor",
        "entity_mentions",
        ["session_id", "extractor", "current"],
    )

    op.create_table(
        "extracted_relations",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("segment_id", sa.Text(), nullable=True),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("predicate", sa.Text(), nullable=False),
        sa.Column("object", sa.Text(), nullable=False),
        sa.Column("confidence", sa.Float(), server_default="0", nullable=False),
        sa.Column("evidence", sa.Text(), server_default="", nullable=False),
        sa.Column("extractor", sa.Text(), nullable=False),
        sa.Column("extractor_version", sa.Integer(), server_default="1", nullable=False),
        sa.Column("current", sa.Boolean(), server_default="true", nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=_now(), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.session_id"],
            name="fk_extracted_relations_session_id_sessions",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_extracted_relations"),
    )
    op.create_index(
        "ix_extracted_relations_session",
        "extracted_relations",
        ["session_id", "extractor", "current"],
    )

    op.create_table(
        "extraction_runs",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("extractor", sa.Text(), nullable=False),
        sa.Column("extractor_version", sa.Integer(), nullable=False),
        sa.Column("input_fingerprint", sa.Text(), nullable=False),
        sa.Column("segments_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("entities_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("relations_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), server_default=_now(), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.session_id"],
            name="fk_extraction_runs_session_id_sessions",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_extraction_runs"),
    )
    op.create_index("ix_extraction_runs_session", "extraction_runs", ["session_id", "finished_at"])

    op.create_table(
        "entity_contradictions",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("entity_id", sa.BigInteger(), nullable=False),
        sa.Column("fact_uuid", sa.Text(), nullable=False),
        sa.Column("fact", sa.Text(), nullable=False),
        sa.Column("predicate", sa.Text(), nullable=False),
        sa.Column("invalid_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("invalidated_by", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("detected_at", sa.DateTime(timezone=True), server_default=_now(), nullable=False),
        sa.ForeignKeyConstraint(
            ["entity_id"],
            ["entities.id"],
            name="fk_entity_contradictions_entity_id_entities",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_entity_contradictions"),
        sa.UniqueConstraint("entity_id", "fact_uuid", name="uq_entity_contradictions_entity_fact"),
    )


def downgrade() -> None:
    op.drop_table("entity_contradictions")
    op.drop_index("ix_extraction_runs_session", table_name="extraction_runs")
    op.drop_table("extraction_runs")
    op.drop_index("ix_extracted_relations_session", table_name="extracted_relations")
    op.drop_table("extracted_relations")
    op.drop_index("ix_entity_mentions_session_extractor", table_name="entity_mentions")
    for column in ("current", "extractor_version", "sensitivity", "properties", "name"):
        op.drop_column("entity_mentions", column)
    op.execute("DELETE FROM entity_mentions WHERE segment_id IS NULL")
    op.alter_column("entity_mentions", "segment_id", existing_type=sa.Text(), nullable=False)
    op.drop_column("entities", "contradicted_at")
    op.drop_column("entities", "sensitivity")
