"""Extraction as durable jobs through the real engine (no LLM, no graph): a conversation
written as JSONL is finalised, extracted by the fast extractor and served by /v1/entities;
re-runs and restarts are idempotent; a new extractor version re-extracts and keeps history."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from engine_harness import Engine, eventually, ingest, query, start_engine, write_conversation

from context_engine.config import Settings
from context_engine.extract.fast import FastExtractor

T0 = datetime(2025, 6, 1, 10, 0, tzinfo=UTC)


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """No vector index: these tests count extraction jobs and runs alone."""
    return settings.model_copy(
        update={"vector_index_enabled": False}
    )  # long past: sessions are finalised at once


CONVERSATION = [
    ("Asha", "My wife Priya is flying to Paris on Friday."),
    ("Ravi", "Nice. Is she still teaching at Stanford University?"),
    ("Asha", "Yes, and I'll call the travel agent tomorrow to book her hotel."),
    ("Ravi", "We decided to meet at Lalbagh on Sunday, by the way."),
]


def write(settings: Settings, session_id: str) -> Path:
    return write_conversation(settings.transcripts_dir, session_id, T0, CONVERSATION)


async def stage(engine: Engine, session_id: str, name: str) -> dict[str, Any] | None:
    rows = await query(
        engine,
        "SELECT * FROM session_stages WHERE session_id = :s AND stage = :st",
        s=session_id,
        st=name,
    )
    return rows[0] if rows else None


async def wait_stage_done(engine: Engine, session_id: str, name: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        row = await stage(engine, session_id, name)
        return row if row and row["status"] == "done" and row["completed_at"] else None

    return await eventually(check, f"{name} of {session_id} done")


async def entities(engine: Engine, **params: object) -> dict[str, dict[str, Any]]:
    r = await engine.get("/v1/entities", limit=500, **params)
    assert r.status_code == 200, r.text
    return {(e["type"], e["name"]): e for e in r.json()["entities"]}


async def test_a_conversation_becomes_entities(engine: Engine, settings: Settings) -> None:
    write(settings, "c1")
    await ingest(engine, "c1")
    await engine.runtime.jobs.scan_idle()  # finalise now (the minute scan would, later)
    done = await wait_stage_done(engine, "c1", "extract")
    assert done["input_fingerprint"].startswith(f"v{FastExtractor.version}:fast@")

    found = await entities(engine)
    assert ("person", "Priya") in found
    assert ("place", "Paris") in found
    assert ("organization", "Stanford University") in found
    promise = next(e for (t, _), e in found.items() if t == "promise")
    assert "call the travel agent" in promise["name"]
    assert found[("person", "Priya")]["episode_count"] == 1

    detail = (await engine.get(f"/v1/entities/{found[('person', 'Priya')]['id']}")).json()
    (mention,) = detail["mentions"]
    assert mention["segment_id"] == "c1-0" and mention["speaker"] == "Asha"
    assert mention["extractor"] == "fast" and mention["extractor_version"] == FastExtractor.version
    assert "Priya" in mention["segment_text"]
    assert (await engine.get("/v1/entities/999999")).status_code == 404

    relations = await query(engine, "SELECT subject, predicate, object FROM extracted_relations")
    assert {"subject": "Asha", "predicate": "spouse", "object": "Priya"} in relations
    events = await query(
        engine,
        "SELECT event_type, data FROM observability_events WHERE creature = 'kraken'"
        " ORDER BY timestamp",
    )
    assert [e["event_type"] for e in events] == ["start", "complete"]
    assert events[1]["data"]["entities"] == len(found)

    # No graph configured: the graph stage is never queued, and nothing failed.
    assert await stage(engine, "c1", "graph") is None
    assert (
        await query(engine, "SELECT count(*) AS n FROM session_stages WHERE status = 'failed'")
    )[0]["n"] == 0


async def test_restart_and_rescan_do_not_extract_again(settings: Settings) -> None:
    write(settings, "c2")
    async for engine in start_engine(settings):
        await ingest(engine, "c2")
        await engine.runtime.jobs.scan_idle()
        await wait_stage_done(engine, "c2", "extract")
        before = await entities(engine)
    async for engine in start_engine(settings):
        # The start-up scan finds nothing pending; a forced re-run skips as already done.
        assert await engine.runtime.jobs.scan_pending() == 0
        runs = await query(engine, "SELECT count(*) AS n FROM extraction_runs")
        assert runs[0]["n"] == 1
        key = engine.runtime.session_stages.extract_key("c2")
        outcome = await engine.runtime.session_stages.extract(key)
        assert outcome.status == "already_done"
        assert await entities(engine) == before


async def test_a_new_extractor_version_re_extracts_and_keeps_history(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(settings, "c3")
    async for engine in start_engine(settings):
        await ingest(engine, "c3")
        await engine.runtime.jobs.scan_idle()
        await wait_stage_done(engine, "c3", "extract")
    monkeypatch.setattr(FastExtractor, "version", FastExtractor.version + 1)
    async for engine in start_engine(settings):
        assert await engine.runtime.jobs.scan_pending() == 1

        async def rerun(engine: Engine = engine) -> dict[str, Any] | None:
            row = await stage(engine, "c3", "extract")
            prefix = f"v{FastExtractor.version}:"
            ok = row and row["status"] == "done" and row["input_fingerprint"].startswith(prefix)
            return row if ok else None

        await eventually(rerun, "re-extraction by the new version")
        versions = await query(
            engine,
            "SELECT extractor_version, current, count(*) AS n FROM entity_mentions"
            " GROUP BY extractor_version, current ORDER BY extractor_version",
        )
        assert [(v["extractor_version"], v["current"]) for v in versions] == [
            (FastExtractor.version - 1, False),
            (FastExtractor.version, True),
        ]
        assert versions[0]["n"] == versions[1]["n"]  # same input, same findings
        found = await entities(engine)
        assert found[("person", "Priya")]["episode_count"] == 1  # not counted twice
