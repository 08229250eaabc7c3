"""The context engine's PostgreSQL schema as SQLAlchemy 2 models.

Alembic migrations (context_engine/store/migrations) create and evolve it; these models are what the
code queries with. Segments carry a GENERATED tsvector with a GIN index for the BM25 leg.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Computed,
    DateTime,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy import text as sql_text
from sqlalchemy.dialects.postgresql import JSONB, TSVECTOR
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# Stable constraint names, so migrations can refer to them.
NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class Session(Base):
    __tablename__ = "sessions"

    session_id: Mapped[str] = mapped_column(Text, primary_key=True)
    device_id: Mapped[str] = mapped_column(Text)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    # Time of the last word heard; a session ends after a silence (CONTEXT_ENGINE_SESSION_GAP_S).
    last_spoken_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    ended_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    segments_count: Mapped[int] = mapped_column(Integer, server_default="0")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())

    __table_args__ = (Index("ix_sessions_started_at", "started_at"),)


class Segment(Base):
    __tablename__ = "segments"

    session_id: Mapped[str] = mapped_column(
        Text, ForeignKey("sessions.session_id", ondelete="CASCADE"), primary_key=True
    )
    segment_id: Mapped[str] = mapped_column(Text, primary_key=True)
    speaker: Mapped[str] = mapped_column(Text)
    text: Mapped[str] = mapped_column(Text)
    start_s: Mapped[float] = mapped_column(Float)
    end_s: Mapped[float] = mapped_column(Float)
    # Wall-clock time the words were spoken: session_started_at + start.
    spoken_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    language: Mapped[str | None] = mapped_column(Text)
    stt_engine: Mapped[str] = mapped_column(Text)
    emotion_label: Mapped[str | None] = mapped_column(Text)
    emotion_score: Mapped[float | None] = mapped_column(Float)
    emotion_engine: Mapped[str | None] = mapped_column(Text)
    pinned: Mapped[bool] = mapped_column(Boolean, server_default="false")
    is_sweep: Mapped[bool] = mapped_column(Boolean, server_default="false")
    # Other voices that talked during the segment: a list of {speaker, start, end} (seconds
    # from session start), or NULL when nobody did (the transcript's `overlap`, ADR 0025).
    overlap: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONB)
    # Set when a sweep segment replaced this fast-path one: kept for history, never searched.
    replaced_by: Mapped[str | None] = mapped_column(Text)
    # Byte offset of the JSONL line this version came from (provenance).
    source_offset: Mapped[int] = mapped_column(BigInteger)
    # Read generation of the session's file that wrote this row: when the file is replaced
    # (truncated, rewritten by a sweep), it is read again under a new generation and rows of
    # older generations, no longer in the file, are deleted.
    generation: Mapped[int] = mapped_column(Integer, server_default="1")
    tsv: Mapped[Any] = mapped_column(
        TSVECTOR, Computed("to_tsvector('english', coalesce(text, ''))", persisted=True)
    )
    ingested_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )

    __table_args__ = (
        Index("ix_segments_tsv", "tsv", postgresql_using="gin"),
        Index("ix_segments_session_start", "session_id", "start_s"),
        # The distinct speaker names, read by a skip scan (speakers.py).
        Index("ix_segments_speaker", "speaker"),
        # Retrieval's time windows only ever look at active (not replaced) segments.
        Index(
            "ix_segments_active_spoken_at",
            "spoken_at",
            postgresql_where="replaced_by IS NULL",
        ),
    )


class Entity(Base):
    """A person, place, promise… the memory knows. The aggregates (first_seen, last_seen,
    episode_count, confidence) are recomputed from the current mentions after every
    extraction run (entity_store.py)."""

    __tablename__ = "entities"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    type: Mapped[str] = mapped_column(Text)
    name: Mapped[str] = mapped_column(Text)
    # Case-folded name: (type, canonical_name) identifies an entity.
    canonical_name: Mapped[str] = mapped_column(Text)
    confidence: Mapped[float] = mapped_column(Float, server_default="0")
    properties: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default="{}")
    # open | private | sensitive: the most restrictive any mention was given.
    sensitivity: Mapped[str] = mapped_column(Text, server_default="open")
    first_seen: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    last_seen: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    # Sessions with a current mention (0: only older extractor versions mentioned it).
    episode_count: Mapped[int] = mapped_column(Integer, server_default="1")
    # When a fact about it was last invalidated by a newer one (entity_contradictions).
    contradicted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Memory tiers (tiers.py, set by the nightly consolidation): L0 episodes, L1 validated
    # facts, L2 deep patterns; salience 2^(-days since last seen / half-life), floored for
    # evergreen types; contradicted = a fact of it was invalidated within the hold window.
    tier: Mapped[str] = mapped_column(Text, server_default="L0")
    salience: Mapped[float] = mapped_column(Float, server_default="1")
    low_salience: Mapped[bool] = mapped_column(Boolean, server_default="false")
    contradicted: Mapped[bool] = mapped_column(Boolean, server_default="false")
    tier_changed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    consolidated_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    community_id: Mapped[int | None] = mapped_column(
        BigInteger, ForeignKey("communities.id", ondelete="SET NULL")
    )

    __table_args__ = (
        UniqueConstraint("type", "canonical_name", name="uq_entities_type_canonical_name"),
        Index("ix_entities_last_seen", "last_seen"),
        Index("ix_entities_tier", "tier"),
        Index("ix_entities_community_id", "community_id"),
        # the graph leg looks entities up by the words of a query, whatever their type
        Index("ix_entities_canonical_name", "canonical_name"),
    )


class Community(Base):
    """A community of entities found by community detection over the entity graph
    (communities.py); written to the graph as graphiti's Community node with HAS_MEMBER edges.
    Membership is entities.community_id; a new detection keeps the id of the old community it
    overlaps most, so ids stay stable while membership drifts."""

    __tablename__ = "communities"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    uuid: Mapped[str] = mapped_column(Text, unique=True)  # the graph node's uuid
    name: Mapped[str] = mapped_column(Text)
    size: Mapped[int] = mapped_column(Integer, server_default="0")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class ConsolidationRun(Base):
    """One run of the consolidation (nightly or POST /v1/consolidate): as of when, progress,
    and what it changed. `night` (a local date) makes the scheduled run once per night."""

    __tablename__ = "consolidation_runs"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    trigger: Mapped[str] = mapped_column(Text)  # schedule | api
    night: Mapped[str | None] = mapped_column(Text, unique=True)
    as_of: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    status: Mapped[str] = mapped_column(Text, server_default="running")  # running|done|failed
    entities_total: Mapped[int] = mapped_column(Integer, server_default="0")
    processed: Mapped[int] = mapped_column(Integer, server_default="0")
    promoted: Mapped[int] = mapped_column(Integer, server_default="0")
    demoted: Mapped[int] = mapped_column(Integer, server_default="0")
    low_salience: Mapped[int] = mapped_column(Integer, server_default="0")
    communities: Mapped[int] = mapped_column(Integer, server_default="0")
    error: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class TierChange(Base):
    """Each promotion and demotion: from, to, why and when (the run's as_of)."""

    __tablename__ = "entity_tier_history"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    entity_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("entities.id", ondelete="CASCADE")
    )
    from_tier: Mapped[str] = mapped_column(Text)
    to_tier: Mapped[str] = mapped_column(Text)
    reason: Mapped[str] = mapped_column(Text)
    changed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    run_id: Mapped[int | None] = mapped_column(
        BigInteger, ForeignKey("consolidation_runs.id", ondelete="SET NULL")
    )

    __table_args__ = (Index("ix_entity_tier_history_entity", "entity_id", "changed_at"),)


class DailyReflection(Base):
    """The reflection on one local day (daily.py): by the LLM when configured, else a
    deterministic summary; also written as a memory session so retrieval can return it."""

    __tablename__ = "daily_reflections"

    day: Mapped[str] = mapped_column(Text, primary_key=True)  # YYYY-MM-DD, local
    text: Mapped[str] = mapped_column(Text)
    summary: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default="{}")
    generated_by: Mapped[str] = mapped_column(Text)
    input_fingerprint: Mapped[str] = mapped_column(Text)
    session_id: Mapped[str | None] = mapped_column(Text)  # the memory session it was stored as
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class PromiseFulfilment(Base):
    """A promise entity found kept: when, and the words that said so."""

    __tablename__ = "promise_fulfilments"

    entity_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("entities.id", ondelete="CASCADE"), primary_key=True
    )
    fulfilled_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    session_id: Mapped[str] = mapped_column(Text)
    segment_id: Mapped[str | None] = mapped_column(Text)
    evidence: Mapped[str] = mapped_column(Text, server_default="")
    detected_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )


class EntityMention(Base):
    """Where an extractor found an entity. `current` is false for the output of an older
    extractor version (kept as history) — only current mentions count."""

    __tablename__ = "entity_mentions"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    entity_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("entities.id", ondelete="CASCADE")
    )
    session_id: Mapped[str] = mapped_column(Text)
    # None when no segment shares a word with the evidence (the mention is the session's).
    segment_id: Mapped[str | None] = mapped_column(Text)
    name: Mapped[str] = mapped_column(Text, server_default="")
    evidence: Mapped[str] = mapped_column(Text, server_default="")
    confidence: Mapped[float] = mapped_column(Float, server_default="0")
    properties: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default="{}")
    sensitivity: Mapped[str] = mapped_column(Text, server_default="open")
    extractor: Mapped[str] = mapped_column(Text)
    extractor_version: Mapped[int] = mapped_column(Integer, server_default="1")
    current: Mapped[bool] = mapped_column(Boolean, server_default="true")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())

    __table_args__ = (
        ForeignKeyConstraint(
            ["session_id", "segment_id"],
            ["segments.session_id", "segments.segment_id"],
            ondelete="CASCADE",
            name="fk_entity_mentions_segment",
        ),
        Index("ix_entity_mentions_entity_id", "entity_id"),
        Index("ix_entity_mentions_segment", "session_id", "segment_id"),
        Index("ix_entity_mentions_session_extractor", "session_id", "extractor", "current"),
    )


class ExtractedRelationRow(Base):
    """A relation an extractor found between two names, e.g. (Asha, spouse, Priya): what the
    graph stage writes as an edge. Versioned like mentions."""

    __tablename__ = "extracted_relations"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(
        Text, ForeignKey("sessions.session_id", ondelete="CASCADE")
    )
    segment_id: Mapped[str | None] = mapped_column(Text)
    subject: Mapped[str] = mapped_column(Text)
    predicate: Mapped[str] = mapped_column(Text)
    object: Mapped[str] = mapped_column(Text)
    confidence: Mapped[float] = mapped_column(Float, server_default="0")
    evidence: Mapped[str] = mapped_column(Text, server_default="")
    # category, when / valid_from / due, source (ExtractedRelation.properties, ADR 0017)
    properties: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default="{}")
    extractor: Mapped[str] = mapped_column(Text)
    extractor_version: Mapped[int] = mapped_column(Integer, server_default="1")
    current: Mapped[bool] = mapped_column(Boolean, server_default="true")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())

    __table_args__ = (
        Index("ix_extracted_relations_session", "session_id", "extractor", "current"),
    )


class StatementRow(Base):
    """A statement a clause made about a person (extract/clauses.py): "Audrey started agility
    classes with their pups", its predicate, object, kind and date. Versioned like mentions;
    knowledge/statement_facts.py merges them by meaning into the facts readers see."""

    __tablename__ = "statements"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(
        Text, ForeignKey("sessions.session_id", ondelete="CASCADE")
    )
    segment_id: Mapped[str | None] = mapped_column(Text)
    speaker: Mapped[str] = mapped_column(Text, server_default="")
    subject: Mapped[str] = mapped_column(Text)
    subject_key: Mapped[str] = mapped_column(Text)  # canonical_name(subject)
    predicate: Mapped[str] = mapped_column(Text)
    object: Mapped[str] = mapped_column(Text, server_default="")
    text: Mapped[str] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(Text, server_default="fact")
    confidence: Mapped[float] = mapped_column(Float, server_default="0")
    valid_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    said_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    evidence: Mapped[str] = mapped_column(Text, server_default="")
    extractor: Mapped[str] = mapped_column(Text)
    extractor_version: Mapped[int] = mapped_column(Integer, server_default="1")
    current: Mapped[bool] = mapped_column(Boolean, server_default="true")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())

    __table_args__ = (
        Index("ix_statements_session", "session_id", "extractor", "current"),
        Index("ix_statements_subject", "subject_key", "current"),
    )


class ExtractionRun(Base):
    """One extraction of one session by one extractor version (the history)."""

    __tablename__ = "extraction_runs"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(
        Text, ForeignKey("sessions.session_id", ondelete="CASCADE")
    )
    extractor: Mapped[str] = mapped_column(Text)
    extractor_version: Mapped[int] = mapped_column(Integer)
    input_fingerprint: Mapped[str] = mapped_column(Text)
    segments_count: Mapped[int] = mapped_column(Integer, server_default="0")
    entities_count: Mapped[int] = mapped_column(Integer, server_default="0")
    relations_count: Mapped[int] = mapped_column(Integer, server_default="0")
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )

    __table_args__ = (Index("ix_extraction_runs_session", "session_id", "finished_at"),)


class EntityContradiction(Base):
    """A fact about an entity that a newer fact invalidated in the graph (invalid_at set
    there, nothing deleted): which fact, when, and what replaced it."""

    __tablename__ = "entity_contradictions"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    entity_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("entities.id", ondelete="CASCADE")
    )
    fact_uuid: Mapped[str] = mapped_column(Text)
    fact: Mapped[str] = mapped_column(Text)
    predicate: Mapped[str] = mapped_column(Text)
    invalid_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    invalidated_by: Mapped[str] = mapped_column(Text)
    session_id: Mapped[str] = mapped_column(Text)
    detected_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )

    __table_args__ = (
        UniqueConstraint("entity_id", "fact_uuid", name="uq_entity_contradictions_entity_fact"),
    )


class VectorSpace(Base):
    """One embedding space: a model and dimension, and the vector collection holding its
    vectors. `building` while it is filled, `ready` once every active segment has a vector;
    retrieval searches the newest ready space, so a new model fills in the background."""

    __tablename__ = "vector_spaces"

    space: Mapped[str] = mapped_column(Text, primary_key=True)  # the collection's name
    model: Mapped[str] = mapped_column(Text)
    dim: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(Text, server_default="building")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    ready_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class SegmentVector(Base):
    """Which segment has a vector in which space, and of which text (a changed text — a fast
    path segment rewritten — is embedded again)."""

    __tablename__ = "segment_vectors"

    session_id: Mapped[str] = mapped_column(Text, primary_key=True)
    segment_id: Mapped[str] = mapped_column(Text, primary_key=True)
    space: Mapped[str] = mapped_column(
        Text, ForeignKey("vector_spaces.space", ondelete="CASCADE"), primary_key=True
    )
    text_sha: Mapped[str] = mapped_column(Text)
    embedded_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )

    __table_args__ = (
        ForeignKeyConstraint(
            ["session_id", "segment_id"],
            ["segments.session_id", "segments.segment_id"],
            ondelete="CASCADE",
            name="fk_segment_vectors_segment",
        ),
        Index("ix_segment_vectors_space_session", "space", "session_id"),
    )


class EntityVector(Base):
    """Which entity has a vector in which space, and of which document (entity_embedding.py).
    No foreign key to the entity: a deleted entity's row marks a point still to delete."""

    __tablename__ = "entity_vectors"

    entity_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    space: Mapped[str] = mapped_column(
        Text, ForeignKey("vector_spaces.space", ondelete="CASCADE"), primary_key=True
    )
    text_sha: Mapped[str] = mapped_column(Text)
    embedded_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )


class VectorTodo(Base):
    """A session whose segments, or an entity whose document's parts (its name, type, episode
    count, mentions), changed since its vectors were last brought up to date: filled by
    triggers (migration 0015), read and cleared by the minute's scans (index/vector_todo.py).
    `changed` moves on at every change, so a run clears only what it saw."""

    __tablename__ = "vector_todo"

    kind: Mapped[str] = mapped_column(Text, primary_key=True)  # "session" or "entity"
    key: Mapped[str] = mapped_column(Text, primary_key=True)  # its session id or entity id
    changed: Mapped[int] = mapped_column(
        BigInteger, server_default=sql_text("nextval('vector_todo_changed')")
    )


class IngestOffset(Base):
    """How far each JSONL file has been ingested. Appends rename a new file into place (new
    inode, ADR 0002), so "same file" is judged by size and `fingerprint`: the sha256 of the
    first and last 64 KiB before `offset`. The inode is kept for diagnostics only."""

    __tablename__ = "ingest_offsets"

    path: Mapped[str] = mapped_column(Text, primary_key=True)
    session_id: Mapped[str] = mapped_column(Text)
    offset: Mapped[int] = mapped_column(BigInteger)
    size: Mapped[int] = mapped_column(BigInteger)
    inode: Mapped[int] = mapped_column(BigInteger)
    fingerprint: Mapped[str] = mapped_column(Text)
    # Bumped when the file was replaced; `cleaned_generation` catches up once rows of older
    # generations are deleted (at the end of the full re-read, which may span a restart).
    generation: Mapped[int] = mapped_column(Integer, server_default="1")
    cleaned_generation: Mapped[int] = mapped_column(Integer, server_default="1")
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class EventOffset(Base):
    """How far each events JSONL file (the audio pipeline's, in `events_dir`) has been read;
    "same file" is judged by size and `fingerprint` as for transcripts (IngestOffset)."""

    __tablename__ = "event_offsets"

    path: Mapped[str] = mapped_column(Text, primary_key=True)
    offset: Mapped[int] = mapped_column(BigInteger)
    size: Mapped[int] = mapped_column(BigInteger)
    fingerprint: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class SessionStage(Base):
    """Durable state of one downstream stage of a session (finalise, later extract, graph,
    embed). (session_id, stage, stage_version, input_fingerprint) is the idempotency key: a
    stage already done for the same version and the same input is not run again."""

    __tablename__ = "session_stages"

    session_id: Mapped[str] = mapped_column(
        Text, ForeignKey("sessions.session_id", ondelete="CASCADE"), primary_key=True
    )
    stage: Mapped[str] = mapped_column(Text, primary_key=True)
    stage_version: Mapped[int] = mapped_column(Integer)
    # queued | running | done | failed (failed = retries exhausted: the dead-letter state)
    status: Mapped[str] = mapped_column(Text)
    # "v{stage_version}:{fingerprint}" of the input the stage last completed.
    input_fingerprint: Mapped[str | None] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer, server_default="0")
    last_error: Mapped[str | None] = mapped_column(Text)
    job_id: Mapped[int | None] = mapped_column(BigInteger)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (Index("ix_session_stages_status", "status"),)


class ObservabilityEventRow(Base):
    __tablename__ = "observability_events"

    event_id: Mapped[str] = mapped_column(Text, primary_key=True)
    timestamp: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    service: Mapped[str] = mapped_column(Text)
    process: Mapped[str] = mapped_column(Text)
    creature: Mapped[str] = mapped_column(Text)
    zone: Mapped[str] = mapped_column(Text)
    event_type: Mapped[str] = mapped_column(Text)
    session_id: Mapped[str | None] = mapped_column(Text)
    data: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default="{}")
    reasoning: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (
        Index("ix_events_timestamp", "timestamp"),
        Index("ix_events_creature_timestamp", "creature", "timestamp"),
        Index("ix_events_service_timestamp", "service", "timestamp"),
        Index("ix_events_session_id", "session_id"),
        Index("ix_events_type_timestamp", "event_type", "timestamp"),
    )


class ForgetRequest(Base):
    """A request to forget a session, an entity or a person (forget.py, ADR 0013). `target`
    names what to remove until every store is done; then it is reduced to a digest, so the
    request itself keeps nothing of what was forgotten."""

    __tablename__ = "forget_requests"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(Text)  # session | entity | person
    target: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default="{}")
    status: Mapped[str] = mapped_column(Text, server_default="pending")  # pending|done|failed
    # per store: what was removed, or the error of the last attempt
    report: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default="{}")
    attempts: Mapped[int] = mapped_column(Integer, server_default="0")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class IdempotencyKey(Base):
    """A write's `Idempotency-Key` (her_os_shared.idempotency, store/idempotency.py): the
    request it was claimed for (`fingerprint`, a sha256), by whom (`owner`, one claim), when,
    and the answer once there is one (`status` NULL while the request runs). Purged after
    the window (`idempotency_window_s`)."""

    __tablename__ = "idempotency_keys"

    scope: Mapped[str] = mapped_column(Text, primary_key=True)  # the route (and caller)
    key: Mapped[str] = mapped_column(Text, primary_key=True)
    fingerprint: Mapped[str] = mapped_column(Text)
    owner: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    status: Mapped[int | None] = mapped_column(Integer)
    body: Mapped[bytes | None] = mapped_column(LargeBinary)

    __table_args__ = (Index("ix_idempotency_keys_created_at", "created_at"),)
