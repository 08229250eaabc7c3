"""Across services: the audio pipeline SIGKILLed while wearables post their transcripts, then
started again on the same volume. Every segment it acknowledged is in the JSONL, no line is
torn, and the context engine — ingesting all along — ends with JSONL ≡ PostgreSQL ≡ vectors ≡
graph episodes (its drift check finds nothing).

The audio pipeline is a real process (`python -m audio_pipeline`); the context engine runs in
this process on a real PostgreSQL and FalkorDB. Every wait polls against a generous deadline."""

from __future__ import annotations

import asyncio
import signal
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from engine_harness import Engine, engine_settings, eventually, free_port, query, start_graph_engine
from service_process import healthy, spawn

from her_os_shared.jsonl import JsonlReader
from her_os_shared.transcript import TranscriptPayload

AUDIO_TOKEN = "a" * 32
WEBHOOK_TOKEN = "w" * 32
WEARABLES = 4
BEFORE_KILL = 40  # acknowledged segments before the SIGKILL
AFTER_RESTART = 40  # and after the restart


def _spawn(root: Path, transcripts: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    return spawn("audio_pipeline", "AUDIO_PIPELINE_", port, {
        "INTERNAL_TOKEN": AUDIO_TOKEN,
        "WEBHOOK_TOKEN": WEBHOOK_TOKEN,
        "TRANSCRIPTS_DIR": str(transcripts),
        "EVENTS_DIR": str(root / "audio-events"),
        "SPOOL_DIR": str(root / "spool"),
        "ENROLLMENT_DIR": str(root / "enrollment"),
        "MODELS_DIR": str(root / "models"),
    }, log)  # fmt: skip


class Wearables:
    """`WEARABLES` devices posting one segment at a time, as fast as they are answered; a
    segment that got no answer (connection refused or cut) is sent again, as a device does."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.acked: set[tuple[str, str]] = set()  # (session_id, segment_id) answered written
        self.refused = 0
        self.stop = asyncio.Event()

    async def run(self, n: int) -> None:
        session_id, k = f"crash-{n}", 0
        async with httpx.AsyncClient(timeout=10) as client:
            while not self.stop.is_set():
                seg = {"id": f"{n}-{k}", "text": f"wearable {n} said line {k} about rivers",
                       "speaker_id": k % 2, "is_user": k % 2 == 0,
                       "start": float(k), "end": k + 0.8}  # fmt: skip
                try:
                    r = await client.post(
                        self.url + "/webhook/transcript",
                        params={"uid": f"dev-{n}", "session_id": session_id,
                                "token": WEBHOOK_TOKEN},
                        json={"segments": [seg]},
                    )  # fmt: skip
                except httpx.TransportError:
                    self.refused += 1
                    await asyncio.sleep(0.05)
                    continue
                assert r.status_code == 200, r.text
                assert r.json()["written"] == 1
                self.acked.add((session_id, f"w-{n}-{k}"))
                k += 1


def jsonl_segments(transcripts: Path) -> tuple[set[tuple[str, str]], int]:
    """(session_id, segment_id) of every segment in the files, and the lines skipped."""
    found: set[tuple[str, str]] = set()
    skipped = 0
    for path in sorted(transcripts.glob("*.jsonl")):
        reader = JsonlReader(path, TranscriptPayload)
        for rec in reader:
            found |= {(rec.value.session_id, s.segment_id) for s in rec.value.segments}
        skipped += len(reader.skipped)
        assert reader.offset == path.stat().st_size, f"{path.name} ends in a partial line"
    return found, skipped


@pytest.fixture
async def engine(
    tmp_path: Path, db_url: str, falkordb_server: str, graph_group: str
) -> AsyncIterator[Engine]:
    settings = engine_settings(
        tmp_path,
        db_url,
        graph_url=falkordb_server,
        graph_group_id=graph_group,
        session_gap_s=2.0,  # the wearables' sessions end soon after they stop: graphed
        watch_debounce_s=0.1,
        watch_max_delay_s=0.5,
        reconcile_interval_s=2.0,
        job_retry_base_s=0.2,
        job_retry_max_s=2.0,
        gc_freeze=False,
    )
    settings.transcripts_dir.mkdir()
    async for e in start_graph_engine(settings):
        yield e


async def test_sigkill_of_the_audio_pipeline_under_load_loses_nothing(
    engine: Engine, tmp_path: Path
) -> None:
    transcripts = engine.runtime.settings.transcripts_dir
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "audio-pipeline.log"
    proc = _spawn(tmp_path, transcripts, port, log)
    wearables = Wearables(url)
    tasks: list[asyncio.Task[None]] = []
    try:
        await healthy(proc, url, log, "the audio pipeline")
        tasks = [asyncio.create_task(wearables.run(n)) for n in range(WEARABLES)]
        await eventually(lambda: _reached(wearables, BEFORE_KILL), "segments before the kill", 120)
        proc.send_signal(signal.SIGKILL)  # mid-stream: requests are in flight
        proc.wait()
        killed_at = len(wearables.acked)

        proc = _spawn(tmp_path, transcripts, port, log)
        await healthy(proc, url, log, "the audio pipeline")
        await eventually(
            lambda: _reached(wearables, killed_at + AFTER_RESTART),
            "segments after the restart",
            120,
        )
    finally:
        wearables.stop.set()
        for task in tasks:  # a failed assertion in a wearable surfaces here
            await task
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
    assert wearables.refused > 0, "no request met the killed pipeline: the kill missed"

    # The files: every acknowledged segment, whole lines only.
    in_files, skipped = jsonl_segments(transcripts)
    assert skipped == 0
    assert wearables.acked <= in_files
    assert len(in_files) - len(wearables.acked) <= WEARABLES  # written, answer lost

    # The engine: all of it, once, in PostgreSQL, the vectors and the graph.
    async def ingested() -> bool | None:
        rows = await query(engine, "SELECT session_id, segment_id FROM segments")
        return True if {(r["session_id"], r["segment_id"]) for r in rows} == in_files else None

    await eventually(ingested, "PostgreSQL to hold the files' segments", 120)

    async def settled() -> dict[str, Any] | None:
        await engine.runtime.jobs.scan_idle()  # the silent sessions end, then are graphed
        r = await engine.get("/v1/check")
        assert r.status_code == 200, r.text
        report = r.json()
        if report["drift_total"] or report["pending"]:
            return None
        graphed = await query(
            engine,
            "SELECT count(*) AS n FROM session_stages WHERE stage = 'graph' AND status = 'done'",
        )
        return report if graphed[0]["n"] == WEARABLES else None

    report = await eventually(settled, "every session graphed and no drift", 180)
    counts = report["counts"]
    assert counts["postgres_segments"] == counts["vector_points"] == len(in_files), report
    assert counts["graph_episodes"] == WEARABLES, report
    (vectors,) = await query(engine, "SELECT count(*) AS n FROM segment_vectors")
    assert vectors["n"] == len(in_files)


async def _reached(wearables: Wearables, n: int) -> bool | None:
    return True if len(wearables.acked) >= n else None
