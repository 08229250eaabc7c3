"""Never lose a segment, never count one twice: the engine SIGKILLed in the middle of a
backlog, and files written while it starts."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
from engine_harness import TOKEN, start_engine
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from context_engine.config import Settings
from her_os_shared.jsonl import JsonlReader, append_records
from her_os_shared.transcript import Segment, TranscriptPayload

pytest_plugins = ["falkordb_harness"]

T0 = datetime(2026, 4, 2, 8, 0, tzinfo=UTC)


def write_backlog(directory: Path, files: int, per_file: int, per_line: int = 10) -> None:
    for f in range(files):
        lines = []
        for first in range(0, per_file, per_line):
            segs = [
                Segment(
                    segment_id=f"g{i}",
                    speaker="A",
                    text=f"file {f} segment {i} words",
                    start=float(i),
                    end=float(i) + 0.5,
                    stt_engine="test",
                )
                for i in range(first, min(first + per_line, per_file))
            ]
            lines.append(
                TranscriptPayload(
                    session_id=f"s{f}", device_id="d", session_started_at=T0, segments=segs
                )
            )
        append_records(directory, f"s{f}", lines)


def expected_segments(directory: Path) -> set[tuple[str, str, str]]:
    out = set()
    for path in directory.glob("*.jsonl"):
        for rec in JsonlReader(path, TranscriptPayload):
            for s in rec.value.segments:
                out.add((rec.value.session_id, s.segment_id, s.text))
    return out


async def stored_segments(db: AsyncEngine) -> list[tuple[str, str, str]]:
    async with db.connect() as conn:
        rows = await conn.execute(text("SELECT session_id, segment_id, text FROM segments"))
        return [tuple(r) for r in rows]


async def count(db: AsyncEngine) -> int:
    try:
        async with db.connect() as conn:
            return (await conn.execute(text("SELECT count(*) FROM segments"))).scalar() or 0
    except Exception:  # the schema may not exist yet
        return 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spawn(db_url: str, transcripts: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "CONTEXT_ENGINE_DATABASE_URL": db_url,
        "CONTEXT_ENGINE_TRANSCRIPTS_DIR": str(transcripts),
        "CONTEXT_ENGINE_SEARCH_INDEX_DIR": str(transcripts.parent / "search-index"),
        "CONTEXT_ENGINE_VECTOR_DIR": str(transcripts.parent / "vectors"),
        "CONTEXT_ENGINE_INTERNAL_TOKEN": TOKEN,
        "CONTEXT_ENGINE_PORT": str(_free_port()),
        "CONTEXT_ENGINE_INGEST_BATCH_SEGMENTS": "100",
        "CONTEXT_ENGINE_INGEST_CONCURRENCY": "2",
    }
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "context_engine"], env=env, stdout=out, stderr=out
        )


async def test_sigkill_mid_backlog_then_restart_holds_exactly_the_files(
    db_url: str, tmp_path: Path
) -> None:
    transcripts = tmp_path / "transcripts"
    write_backlog(transcripts, files=10, per_file=1000)  # 10,000 segments
    expected = expected_segments(transcripts)
    assert len(expected) == 10_000
    db = create_async_engine(db_url)
    log = tmp_path / "engine.log"
    try:
        proc = _spawn(db_url, transcripts, log)
        try:
            deadline = time.monotonic() + 120
            while (n := await count(db)) == 0:
                assert proc.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, "ingestion never started"
                await asyncio.sleep(0.01)
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.kill()
            proc.wait()
        killed_at = await count(db)
        assert 0 < n <= killed_at < 10_000, "the kill did not land mid-backlog"

        proc = _spawn(db_url, transcripts, log)
        try:
            deadline = time.monotonic() + 120
            while await count(db) < 10_000 and time.monotonic() < deadline:
                assert proc.poll() is None, log.read_text()[-3000:]
                await asyncio.sleep(0.2)
            await asyncio.sleep(1.0)  # anything extra would show now
            stored = await stored_segments(db)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
        assert len(stored) == len(set(stored)) == 10_000
        assert set(stored) == expected
        async with db.connect() as conn:
            offsets = dict(
                (await conn.execute(text('SELECT path, "offset" FROM ingest_offsets'))).all()
            )
        assert offsets == {str(p): p.stat().st_size for p in transcripts.glob("*.jsonl")}
    finally:
        await db.dispose()


async def test_files_written_while_the_engine_starts_are_all_ingested_once(
    settings: Settings,
) -> None:
    transcripts = settings.transcripts_dir
    transcripts.mkdir(parents=True)
    stop = threading.Event()

    def writer() -> None:
        i = 0
        while not stop.is_set() or i < 60:
            sid = f"r{i % 6}"
            seg = Segment(segment_id=f"g{i}", speaker="B", text=f"race {i}", start=float(i),
                          end=float(i) + 1, stt_engine="test")  # fmt: skip
            payload = TranscriptPayload(
                session_id=sid, device_id="d", session_started_at=T0, segments=[seg]
            )
            append_records(transcripts, sid, [payload])
            i += 1
            time.sleep(0.005)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        async for engine in start_engine(settings):
            stop.set()
            await asyncio.to_thread(thread.join)
            expected = expected_segments(transcripts)
            db = engine.runtime.db.main
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if await count(db) >= len(expected):
                    break
                await asyncio.sleep(0.1)
            await engine.runtime.watcher.idle()
            stored = await stored_segments(db)
            assert len(stored) == len(set(stored)) == len(expected)
            assert set(stored) == expected
    finally:
        stop.set()
        thread.join()


# --- every store: PostgreSQL, the vectors and the graph episodes ----------------------------


def _spawn_on(port: int, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "context_engine"],
            env={**os.environ, **env, "CONTEXT_ENGINE_PORT": str(port)},
            stdout=out,
            stderr=out,
        )


async def _scalar(db: AsyncEngine, sql: str) -> int:
    try:
        async with db.connect() as conn:
            return int((await conn.execute(text(sql))).scalar() or 0)
    except Exception:  # the schema may not exist yet
        return 0


async def test_sigkill_mid_load_then_every_store_matches_the_jsonl(
    db_url: str, tmp_path: Path, falkordb_server: str, graph_group: str
) -> None:
    """SIGKILL while segments are ingested, embedded and written to the graph; after the
    restart and the jobs, the drift check finds JSONL ≡ PostgreSQL ≡ vectors ≡ graph."""
    sessions, per_session = 12, 100
    transcripts = tmp_path / "transcripts"
    write_backlog(transcripts, files=sessions, per_file=per_session)
    total = sessions * per_session
    env = {
        "CONTEXT_ENGINE_DATABASE_URL": db_url,
        "CONTEXT_ENGINE_TRANSCRIPTS_DIR": str(transcripts),
        "CONTEXT_ENGINE_EVENTS_DIR": str(tmp_path / "events"),
        "CONTEXT_ENGINE_SEARCH_INDEX_DIR": str(tmp_path / "search-index"),
        "CONTEXT_ENGINE_VECTOR_DIR": str(tmp_path / "vectors"),
        "CONTEXT_ENGINE_GRAPH_URL": falkordb_server,
        "CONTEXT_ENGINE_GRAPH_GROUP_ID": graph_group,
        "CONTEXT_ENGINE_INTERNAL_TOKEN": TOKEN,
        "CONTEXT_ENGINE_INGEST_BATCH_SEGMENTS": "50",
        "CONTEXT_ENGINE_EMBED_BATCH_SEGMENTS": "16",
        "CONTEXT_ENGINE_JOB_RETRY_BASE_S": "0.5",
        "CONTEXT_ENGINE_JOB_RETRY_MAX_S": "2",
    }
    db = create_async_engine(db_url)
    log = tmp_path / "engine.log"
    graphed = "SELECT count(*) FROM session_stages WHERE stage = 'graph' AND status = 'done'"
    try:
        proc = _spawn_on(_free_port(), env, log)
        try:
            deadline = time.monotonic() + 180
            while await _scalar(db, graphed) == 0:  # the first session reached the graph
                assert proc.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, "no graph stage finished"
                await asyncio.sleep(0.02)
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.kill()
            proc.wait()
        at_kill = {
            "segments": await _scalar(db, "SELECT count(*) FROM segments"),
            "vectors": await _scalar(db, "SELECT count(*) FROM segment_vectors"),
            "graph": await _scalar(db, graphed),
        }
        assert at_kill["vectors"] < total or at_kill["graph"] < sessions, (
            f"the kill did not land mid-load: {at_kill}"
        )
        # Jobs the dead worker held are rescued by the new engine once the dead worker's
        # heartbeat is 30 s old (runtime._rescue_after_start), not 5 minutes later.
        port = _free_port()
        proc = _spawn_on(port, env, log)
        try:
            async with httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}", headers={"X-Internal-Token": TOKEN}
            ) as client:
                deadline = time.monotonic() + 300
                report: dict[str, object] = {}
                while time.monotonic() < deadline:
                    assert proc.poll() is None, log.read_text()[-3000:]
                    try:
                        r = await client.get("/v1/check", timeout=60)
                    except httpx.HTTPError:
                        r = None
                    if r is not None and r.status_code == 200:
                        report = r.json()
                        c = report["counts"]
                        if (
                            report["drift_total"] == 0
                            and not report["pending"]
                            and c.get("graph_done") == sessions
                            and c.get("vector_points") == total
                        ):
                            break
                    await asyncio.sleep(1.0)
                else:
                    raise AssertionError(f"stores never matched the JSONL (killed at {at_kill}): "
                                         f"{report}")  # fmt: skip
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
        counts = report["counts"]
        assert isinstance(counts, dict)
        assert counts["jsonl_segments"] == counts["postgres_segments"] == total
        assert counts["vector_rows"] == counts["vector_points"] == total
        assert counts["graph_done"] == counts["graph_episodes"] == sessions
        assert report["skipped"] == {}
    finally:
        await db.dispose()
