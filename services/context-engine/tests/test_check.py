"""The drift check (check.py): drift made on purpose in each store, found, and repaired to
zero — except PostgreSQL rows with no JSONL line, which are only reported (nothing is lost)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from engine_harness import (
    TOKEN,
    Engine,
    eventually,
    ingest,
    query,
    serve_engine,
    write_conversation,
)
from falkordb_harness import cypher
from sqlalchemy import text

from context_engine.config import Settings
from context_engine.pipeline.drift import StoreChecker
from context_engine.vectors.base import point_id
from her_os_shared.jsonl import append_records
from her_os_shared.transcript import Segment, TranscriptPayload

pytest_plugins = ["falkordb_harness"]

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)  # long silent: sessions finalise at once
LINES = [
    ("Asha", "Priya moved to Lisbon in May."),
    ("Priya", "I work at the harbour museum now."),
    ("Asha", "Ravi said he would call on Sunday."),
]


async def check(engine: Engine) -> dict[str, Any]:
    r = await engine.get("/v1/check")
    assert r.status_code == 200, r.text
    return r.json()


def counts(report: dict[str, Any]) -> dict[str, int]:
    return {k: v["count"] for k, v in report["drift"].items() if v["count"]}


async def settled(engine: Engine, expect: dict[str, int] | None = None) -> dict[str, Any]:
    """The check once no job is in flight and the drift is `expect` (default none)."""

    async def done() -> dict[str, Any] | None:
        report = await check(engine)
        return report if not report["pending"] and counts(report) == (expect or {}) else None

    return await eventually(done, f"the drift to settle at {expect or 'zero'}", deadline_s=90)


async def test_check_finds_and_repairs_drift_in_every_store(graph_engine: Engine) -> None:
    engine = graph_engine
    transcripts = engine.runtime.settings.transcripts_dir
    for sid in ("ca", "cb", "cc"):
        write_conversation(transcripts, sid, T0, LINES)
        await ingest(engine, sid)

    async def graphed() -> bool | None:
        rows = await query(
            engine, "SELECT count(*) AS n FROM session_stages WHERE stage = 'graph' "
            "AND status = 'done'"
        )  # fmt: skip
        return True if rows[0]["n"] == 3 else None

    await eventually(graphed, "the three graph stages", deadline_s=90)
    clean = await settled(engine)
    assert clean["counts"]["jsonl_segments"] == clean["counts"]["postgres_segments"] == 9
    assert clean["counts"]["vector_points"] == 9 and clean["counts"]["graph_episodes"] == 3
    assert not clean["skipped"]

    # Drift, one kind at a time. The watcher off: an appended line stays un-ingested.
    await engine.runtime.watcher.stop()
    late = Segment(segment_id="ca-late", speaker="Asha", text="And the ferry was late.",
                   start=30.0, end=32.0, stt_engine="test")  # fmt: skip
    append_records(transcripts, "ca", [TranscriptPayload(
        session_id="ca", device_id="dev1", session_started_at=T0, segments=[late])])  # fmt: skip
    async with engine.runtime.db.main.begin() as conn:
        # a row lost from PostgreSQL (its vector row goes with it: its point is an orphan)
        await conn.execute(text("DELETE FROM segments WHERE segment_id = 'ca-1'"))
        # a row PostgreSQL has and no JSONL line: reported, never deleted
        await conn.execute(
            text(
                "INSERT INTO segments (session_id, segment_id, speaker, text, start_s, end_s, "
                "spoken_at, stt_engine, source_offset) VALUES ('cb', 'cb-only-pg', 'Asha', "
                "'Written by hand into PostgreSQL.', 40, 41, now(), 'test', 0)"
            )
        )
    embedding = engine.runtime.embedding
    assert embedding is not None
    await embedding.store.delete(embedding.space, [point_id("segment", ("cb", "cb-0"))])
    graph = engine.runtime.graph
    assert graph is not None
    await cypher(graph, "MATCH (e:Episodic {name: 'session-cc'}) DETACH DELETE e")

    report = await check(engine)
    assert counts(report) == {
        "jsonl_not_in_postgres": 2,  # ca-1 deleted, ca-late never ingested
        "postgres_not_in_jsonl": 1,
        "vectors_missing": 1,  # cb-only-pg
        "vector_rows_without_point": 1,  # cb-0
        "orphan_points": 1,  # ca-1's
        "graph_episode_missing": 1,
    }, report
    drift = report["drift"]
    assert sorted(drift["jsonl_not_in_postgres"]["sample"]) == ["ca/ca-1", "ca/ca-late"]
    assert drift["postgres_not_in_jsonl"]["sample"] == ["cb/cb-only-pg"]
    assert drift["vector_rows_without_point"]["sample"] == ["cb/cb-0"]
    assert drift["graph_episode_missing"]["sample"] == ["cc"]

    # progress and outcome are events of the check
    events = await eventually(lambda: _events(engine, report["check_id"]), "the check's events")
    assert {"start", "metric", "complete"} <= {e["event_type"] for e in events}

    r = await engine.post("/v1/check/repair")
    assert r.status_code == 200, r.text
    repaired = r.json()
    assert counts(repaired["before"]) == counts(report)
    assert repaired["repaired"]["reingested_sessions"] == 1
    assert repaired["repaired"]["orphan_points_deleted"] == 1
    assert repaired["repaired"]["reported_only"] == 1

    # once the queued jobs ran: only the row without a JSONL line is left, and kept
    final = await settled(engine, {"postgres_not_in_jsonl": 1})
    assert final["counts"]["vector_points"] == final["counts"]["vector_rows"] == 11
    assert final["counts"]["graph_episodes"] == 3
    kept = await query(engine, "SELECT text FROM segments WHERE segment_id = 'cb-only-pg'")
    assert kept == [{"text": "Written by hand into PostgreSQL."}]
    rows = await query(engine, "SELECT segment_id FROM segments WHERE session_id = 'ca'")
    assert {r["segment_id"] for r in rows} == {"ca-0", "ca-1", "ca-2", "ca-late"}


async def test_a_re_ingested_segment_keeps_the_point_its_embed_job_writes(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A segment lost from PostgreSQL leaves its point an orphan; the repair re-ingests the
    segment, whose embed job writes the point again (same id). A job that finishes before the
    repair's own orphan deletion must not lose it: orphans go first."""
    transcripts = engine.runtime.settings.transcripts_dir
    write_conversation(transcripts, "ro", T0, LINES)
    await ingest(engine, "ro")
    await settled(engine)
    await engine.runtime.watcher.stop()
    async with engine.runtime.db.main.begin() as conn:
        await conn.execute(text("DELETE FROM segments WHERE segment_id = 'ro-1'"))
    assert counts(await check(engine)) == {"jsonl_not_in_postgres": 1, "orphan_points": 1}

    embedding = engine.runtime.embedding
    assert embedding is not None
    ingestor = engine.runtime.checker.ingestor
    reingest = ingestor.ingest_file

    async def reingest_and_embed_at_once(path: Path, **kw: Any) -> Any:
        result = await reingest(path, **kw)
        await embedding.embed_session("ro")  # the embed job, done before the repair goes on
        return result

    monkeypatch.setattr(ingestor, "ingest_file", reingest_and_embed_at_once)
    r = await engine.post("/v1/check/repair")
    assert r.status_code == 200, r.text
    assert r.json()["repaired"]["orphan_points_deleted"] == 1
    final = await settled(engine)
    assert final["counts"]["vector_points"] == final["counts"]["vector_rows"] == 3


async def _events(engine: Engine, check_id: str) -> list[dict[str, Any]] | None:
    r = await engine.get("/v1/events", creature="sea-cucumber", limit=200)
    found = [e for e in r.json()["events"] if e["data"].get("check_id") == check_id]
    return found if any(e["event_type"] == "complete" for e in found) else None


async def test_graph_orphan_episode_is_removed(graph_engine: Engine) -> None:
    """An episode of a session that no longer exists anywhere (a crash mid-forget)."""
    engine = graph_engine
    transcripts = engine.runtime.settings.transcripts_dir
    write_conversation(transcripts, "gone", T0, LINES)
    await ingest(engine, "gone")

    async def graphed() -> bool | None:
        report = await check(engine)
        return True if report["counts"].get("graph_episodes") == 1 else None

    await eventually(graphed, "the session's episode", deadline_s=90)
    await settled(engine)
    # The session leaves the JSONL and PostgreSQL behind the graph's back.
    (transcripts / "gone.jsonl").unlink()
    async with engine.runtime.db.main.begin() as conn:
        await conn.execute(text("DELETE FROM sessions WHERE session_id = 'gone'"))
        await conn.execute(text("DELETE FROM ingest_offsets WHERE session_id = 'gone'"))
    embedding = engine.runtime.embedding
    assert embedding is not None
    report = await check(engine)
    assert counts(report) == {"graph_orphan_episodes": 1, "orphan_points": 3}, report
    r = await engine.post("/v1/check/repair")
    assert r.status_code == 200, r.text
    assert counts(r.json()["after"]) == {}
    # No segment point is left (the entities stay in PostgreSQL, and so do their points).
    assert await embedding.store.segment_points(embedding.space) == []


async def test_check_needs_the_token(engine: Engine) -> None:
    assert (await engine.client.get("/v1/check")).status_code == 401
    assert (await engine.client.post("/v1/check/repair")).status_code == 401
    report = await check(engine)  # no graph configured: said, not failed
    assert report["skipped"] == {"graph": "no graph configured"}
    assert report["drift_total"] == 0


async def test_her_os_check_command(settings: Settings, tmp_path: Path) -> None:
    """The CLI against a served engine: drift → exit 1 with the table; --repair → exit 0."""
    from typer.testing import CliRunner

    from her_os.main import app

    runner = CliRunner()
    env = {"HER_OS_INTERNAL_TOKEN": TOKEN}
    data = ["--data-dir", str(tmp_path / "platform")]
    async with contextlib.aclosing(serve_engine(settings)) as engines:
        served = await anext(engines)
        transcripts = settings.transcripts_dir
        write_conversation(transcripts, "cli", T0, LINES)

        async def embedded(checker: StoreChecker = served.runtime.checker) -> bool | None:
            rows = await checker.check()
            return True if rows.counts.get("vector_points") == 3 and not rows.pending else None

        await eventually(embedded, "the session's vectors", deadline_s=60)
        await served.runtime.watcher.stop()
        async with served.runtime.db.main.begin() as conn:
            await conn.execute(text("DELETE FROM segments WHERE segment_id = 'cli-2'"))

        args = ["check", *data, "--url", served.base_url]
        found = await asyncio.to_thread(runner.invoke, app, [*args, "--json"], env=env)
        assert found.exit_code == 1, found.output
        # (the engine's own log lines share this process's stdout)
        out = found.stdout
        report, _ = json.JSONDecoder().raw_decode(out[out.index('{\n  "') :])
        assert report["drift"]["jsonl_not_in_postgres"]["sample"] == ["cli/cli-2"]

        fixed = await asyncio.to_thread(runner.invoke, app, [*args, "--repair"], env=env)
        assert fixed.exit_code == 0, fixed.output
        assert "drift after repair" in fixed.output
        assert "the stores agree with the JSONL transcripts" in fixed.output
        async with served.runtime.db.main.connect() as conn:
            assert (await conn.execute(text("SELECT count(*) FROM segments"))).scalar() == 3

    # no engine running: said, exit code 2
    gone = await asyncio.to_thread(runner.invoke, app, ["check", *data], env=env)
    assert gone.exit_code == 2 and "not running" in gone.output
