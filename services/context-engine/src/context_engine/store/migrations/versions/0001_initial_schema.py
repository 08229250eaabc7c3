"""Initial schema: sessions, segments (GENERATED tsvector + GIN), entities, entity_mentions,
ingest_offsets, observability_events.

Revision ID: 0001
Revises: (none)
Create Date: 2026-11-22 01:43:02.108434
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "entities",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("type", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("canonical_name", sa.Text(), nullable=False),
        sa.Column("confidence", sa.Float(), server_default="0", nullable=False),
        sa.Column(
            "properties",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default="{}",
            nullable=False,
        ),
        sa.Column("first_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("episode_count", sa.Integer(), server_default="1", nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_entities")),
        sa.UniqueConstraint("type", "canonical_name", name="uq_entities_type_canonical_name"),
    )
    op.create_index("ix_entities_last_seen", "entities", ["last_seen"], unique=False)
    op.create_table(
        "ingest_offsets",
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("offset", sa.BigInteger(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("inode", sa.BigInteger(), nullable=False),
        sa.Column("prefix_sha256", sa.Text(), nullable=False),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("path", name=op.f("pk_ingest_offsets")),
    )
    op.create_table(
        "observability_events",
        sa.Column("event_id", sa.Text(), nullable=False),
        sa.Column("timestamp", sa.DateTime(timezone=True), nullable=False),
        sa.Column("service", sa.Text(), nullable=False),
        sa.Column("process", sa.Text(), nullable=False),
        sa.Column("creature", sa.Text(), nullable=False),
        sa.Column("zone", sa.Text(), nullable=False),
        sa.Column("event_type", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Text(), nullable=True),
        sa.Column(
            "data", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False
        ),
        sa.Column("reasoning", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("event_id", name=op.f("pk_observability_events")),
    )
    op.create_index(
        "ix_events_creature_timestamp",
        "observability_events",
        ["creature", "timestamp"],
        unique=False,
    )
    op.create_index(
        "ix_events_service_timestamp",
        "observability_events",
        ["service", "timestamp"],
        unique=False,
    )
    op.create_index("ix_events_session_id", "observability_events", ["session_id"], unique=False)
    op.create_index("ix_events_timestamp", "observability_events", ["timestamp"], unique=False)
    op.create_index(
        "ix_events_type_timestamp",
        "observability_events",
        ["event_type", "timestamp"],
        unique=False,
    )
    op.create_table(
        "sessions",
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("device_id", sa.Text(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_spoken_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("segments_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("session_id", name=op.f("pk_sessions")),
    )
    op.create_index("ix_sessions_started_at", "sessions", ["started_at"], unique=False)
    op.create_table(
        "segments",
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("segment_id", sa.Text(), nullable=False),
        sa.Column("speaker", sa.Text(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("start_s", sa.Float(), nullable=False),
        sa.Column("end_s", sa.Float(), nullable=False),
        sa.Column("spoken_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("language", sa.Text(), nullable=True),
        sa.Column("stt_engine", sa.Text(), nullable=False),
        sa.Column("emotion_label", sa.Text(), nullable=True),
        sa.Column("emotion_score", sa.Float(), nullable=True),
        sa.Column("emotion_engine", sa.Text(), nullable=True),
        sa.Column("pinned", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("is_sweep", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("replaced_by", sa.Text(), nullable=True),
        sa.Column("source_offset", sa.BigInteger(), nullable=False),
        sa.Column(
            "tsv",
            postgresql.TSVECTOR(),
            sa.Computed("to_tsvector('english', coalesce(text, ''))", persisted=True),
            nullable=False,
        ),
        sa.Column(
            "ingested_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.session_id"],
            name=op.f("fk_segments_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_id", "segment_id", name=op.f("pk_segments")),
    )
    op.create_index(
        "ix_segments_active_spoken_at",
        "segments",
        ["spoken_at"],
        unique=False,
        postgresql_where="replaced_by IS NULL",
    )
    op.create_index(
        "ix_segments_session_start", "segments", ["session_id", "start_s"], unique=False
    )
    op.create_index("ix_segments_tsv", "segments", ["tsv"], unique=False, postgresql_using="gin")
    op.create_table(
        "entity_mentions",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("entity_id", sa.BigInteger(), nullable=False),
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("segment_id", sa.Text(), nullable=False),
        sa.Column("evidence", sa.Text(), server_default="", nullable=False),
        sa.Column("confidence", sa.Float(), server_default="0", nullable=False),
        sa.Column("extractor", sa.Text(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["entity_id"],
            ["entities.id"],
            name=op.f("fk_entity_mentions_entity_id_entities"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["session_id", "segment_id"],
            ["segments.session_id", "segments.segment_id"],
            name="fk_entity_mentions_segment",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_entity_mentions")),
    )
    op.create_index("ix_entity_mentions_entity_id", "entity_mentions", ["entity_id"], unique=False)
    op.create_index(
        "ix_entity_mentions_segment", "entity_mentions", ["session_id", "segment_id"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_entity_mentions_segment", table_name="entity_mentions")
    op.drop_index("ix_entity_mentions_entity_id", table_name="entity_mentions")
    op.drop_table("entity_mentions")
    op.drop_index("ix_segments_tsv", table_name="segments", postgresql_using="gin")
    op.drop_index("ix_segments_session_start", table_name="segments")
    op.drop_index(
        "ix_segments_active_spoken_at",
        table_name="segments",
        postgresql_where="replaced_by IS NULL",
    )
    op.drop_table("segments")
    op.drop_index("ix_sessions_started_at", table_name="sessions")
    op.drop_table("sessions")
    op.drop_index("ix_events_type_timestamp", table_name="observability_events")
    op.drop_index("ix_events_timestamp", table_name="observability_events")
    op.drop_index("ix_events_session_id", table_name="observability_events")
    op.drop_index("ix_events_service_timestamp", table_name="observability_events")
    op.drop_index("ix_events_creature_timestamp", table_name="observability_events")
    op.drop_table("observability_events")
    op.drop_table("ingest_offsets")
    op.drop_index("ix_entities_last_seen", table_name="entities")
    op.drop_table("entities")
