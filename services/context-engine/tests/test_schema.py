"""The schema, through the real Alembic migrations on a real PostgreSQL."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text
from sqlalchemy.ext.asyncio import create_async_engine

from context_engine.store.migrate import downgrade, upgrade
from context_engine.store.models import Base

TABLES = {
    "sessions", "segments", "entities", "entity_mentions", "ingest_offsets",
    "observability_events", "session_stages", "extracted_relations", "extraction_runs",
    "entity_contradictions", "vector_spaces", "segment_vectors", "communities",
    "consolidation_runs", "entity_tier_history", "daily_reflections", "promise_fulfilments",
    "event_offsets", "entity_vectors", "vector_todo", "idempotency_keys",
}  # fmt: skip


@pytest.fixture
async def engine(postgres_url: str):
    await asyncio.to_thread(downgrade, postgres_url, "base")
    await asyncio.to_thread(upgrade, postgres_url)
    eng = create_async_engine(postgres_url)
    yield eng
    await eng.dispose()


async def test_migrations_create_the_schema_and_match_the_models(engine) -> None:
    async with engine.connect() as conn:
        tables = await conn.run_sync(lambda c: set(inspect(c).get_table_names()))
        diff = await conn.run_sync(
            lambda c: compare_metadata(MigrationContext.configure(c), Base.metadata)
        )
        version = (await conn.execute(text("SELECT version_num FROM alembic_version"))).scalar()
    assert TABLES <= tables
    assert diff == [], f"models and migrations disagree: {diff}"
    assert version == "0016"


async def test_segment_text_is_searchable_through_the_generated_tsvector(engine) -> None:
    now = datetime(2026, 5, 8, 13, 56, tzinfo=UTC)
    async with engine.begin() as conn:
        await conn.execute(
            text("INSERT INTO sessions (session_id, device_id, started_at) VALUES ('s1', 'd', :t)"),
            {"t": now},
        )
        for i, words in enumerate(["Priya is moving to Koramangala", "we ordered coffee"]):
            await conn.execute(
                text(
                    "INSERT INTO segments (session_id, segment_id, speaker, text, start_s, end_s,"
                    " spoken_at, stt_engine, source_offset) VALUES"
                    " ('s1', :id, 'A', :text, :i, :i, :t, 'test', 0)"
                ),
                {"id": f"g{i}", "text": words, "i": float(i), "t": now},
            )
    async with engine.connect() as conn:
        hits = (
            (
                await conn.execute(
                    text(
                        "SELECT segment_id FROM segments"
                        " WHERE tsv @@ websearch_to_tsquery('english', :q)"
                    ),
                    {"q": '"moving to" -coffee'},
                )
            )
            .scalars()
            .all()
        )
        await conn.execute(text("SET LOCAL enable_seqscan = off"))
        plan_rows = await conn.execute(
            text(
                "EXPLAIN SELECT 1 FROM segments"
                " WHERE tsv @@ websearch_to_tsquery('english', 'coffee')"
            )
        )
        plan = "\n".join(plan_rows.scalars())
    assert hits == ["g0"]
    assert "ix_segments_tsv" in plan  # the GIN index serves full-text queries


async def test_downgrade_then_upgrade_is_clean(postgres_url: str) -> None:
    await asyncio.to_thread(upgrade, postgres_url)
    await asyncio.to_thread(downgrade, postgres_url, "base")
    eng = create_async_engine(postgres_url)
    async with eng.connect() as conn:
        tables = await conn.run_sync(lambda c: set(inspect(c).get_table_names()))
    await eng.dispose()
    assert not (TABLES & tables)
    await asyncio.to_thread(upgrade, postgres_url)
    await asyncio.to_thread(upgrade, postgres_url)  # idempotent
