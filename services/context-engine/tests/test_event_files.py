"""The audio pipeline's event files (`events_dir/*.jsonl`, written with the shared atomic
writer as the audio pipeline writes them) read by the engine's events watcher: stored once,
published to the live stream once, across restarts and rewritten files."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

from engine_harness import Engine, eventually, query, start_engine

from context_engine.config import Settings
from context_engine.observe.chronicler import EventFilter
from her_os_shared.events import ObservabilityEvent
from her_os_shared.jsonl import append_records, replace_records

STREAM = "audio-pipeline-2026112212"  # the audio pipeline's hourly stream name


def audio_events(session_id: str, n: int, first: int = 0) -> list[ObservabilityEvent]:
    now = datetime.now(UTC)
    creatures = ("seahorse", "cuttlefish", "siren", "cerberus", "hydra")
    return [
        ObservabilityEvent.for_creature(
            creatures[i % len(creatures)],
            "complete",
            session_id=session_id,
            data={"i": i},
            timestamp=now + timedelta(milliseconds=i),
        )
        for i in range(first, first + n)
    ]


@contextlib.asynccontextmanager
async def running(settings: Settings) -> AsyncIterator[Engine]:
    async for engine in start_engine(settings):
        yield engine


async def stored_ids(engine: Engine) -> list[str]:
    rows = await query(
        engine,
        "SELECT event_id FROM observability_events WHERE service = 'audio-pipeline'"
        " ORDER BY timestamp",
    )
    return [r["event_id"] for r in rows]


async def wait_stored(engine: Engine, n: int) -> list[str]:
    async def check() -> list[str] | None:
        ids = await stored_ids(engine)
        return ids if len(ids) >= n else None

    return await eventually(check, f"{n} audio-pipeline events to be stored")


async def test_events_written_by_the_audio_pipeline_are_stored_and_streamed(
    engine: Engine, settings: Settings
) -> None:
    sub, _ = engine.runtime.chronicler.subscribe(
        EventFilter(services=frozenset({"audio-pipeline"}))
    )
    first = audio_events("s1", 3)
    path = append_records(settings.events_dir, STREAM, first)
    assert await wait_stored(engine, 3) == [e.event_id for e in first]

    chunk = await asyncio.wait_for(sub.next_chunk(), 30)
    assert chunk is not None
    assert [json.loads(line[6:])["event_id"] for line in chunk.decode().splitlines()
            if line.startswith("data: ")] == [e.event_id for e in first]  # fmt: skip

    more = audio_events("s1", 2, first=3)
    append_records(settings.events_dir, STREAM, more)
    ids = await wait_stored(engine, 5)
    assert ids == [e.event_id for e in first + more]
    page = (await engine.get("/v1/events", service="audio-pipeline")).json()
    assert page["source"] == "buffer"
    assert [e["data"]["i"] for e in page["events"]] == [4, 3, 2, 1, 0]
    assert page["events"][0]["creature"] == "hydra" and page["events"][0]["zone"] == "listening"

    (offset,) = await query(engine, 'SELECT path, "offset", size FROM event_offsets')
    assert offset["path"] == str(path) and offset["offset"] == path.stat().st_size


async def test_a_restart_neither_loses_nor_repeats_events(settings: Settings) -> None:
    first = audio_events("s2", 4)
    append_records(settings.events_dir, STREAM, first)
    async with running(settings) as engine:
        await wait_stored(engine, 4)

    # Written while the engine was down; then the file rewritten (the same events in
    # another order, and one more): read again from the start, each event stored once.
    later = audio_events("s2", 2, first=4)
    append_records(settings.events_dir, STREAM, later)
    async with running(settings) as engine:
        assert await wait_stored(engine, 6) == [e.event_id for e in first + later]
        ring_ids = [e.event.event_id for e in engine.runtime.chronicler.ring.after(0, 100)]
        assert len(ring_ids) == len(set(ring_ids))
        published = engine.runtime.chronicler.counters.recorded

        last = audio_events("s2", 1, first=6)
        replace_records(settings.events_dir, STREAM, [*reversed(first + later), *last])
        ids = await wait_stored(engine, 7)
        assert ids == [e.event_id for e in first + later + last]

        # Only the one new event reached the ring and the stream.
        async def one_more() -> bool | None:
            counters = engine.runtime.chronicler.counters
            return True if counters.recorded == published + 1 else None

        await eventually(one_more, "the new event to be published")
        page = (await engine.get("/v1/events", service="audio-pipeline", limit=100)).json()
        assert len(page["events"]) == 7 == len({e["event_id"] for e in page["events"]})


async def test_bad_lines_and_expired_events_are_skipped(engine: Engine, settings: Settings) -> None:
    old = ObservabilityEvent.for_creature(
        "jellyfish", "complete", timestamp=datetime.now(UTC) - timedelta(days=30)
    )
    good = audio_events("s3", 1)[0]
    settings.events_dir.mkdir(parents=True, exist_ok=True)
    lines: list[Any] = [
        b"not json\n",
        json.dumps({"creature": "jellyfish"}).encode() + b"\n",
        old.model_dump_json().encode() + b"\n",
        good.model_dump_json().encode() + b"\n",
    ]
    (settings.events_dir / f"{STREAM}.jsonl").write_bytes(b"".join(lines))
    assert await wait_stored(engine, 1) == [good.event_id]
    (offset,) = await query(engine, 'SELECT "offset" FROM event_offsets')
    assert offset["offset"] == sum(len(x) for x in lines)  # the bad lines are behind us


async def test_a_file_of_the_old_registry_is_read_under_todays_names(
    engine: Engine, settings: Settings
) -> None:
    # An audio pipeline from before ADR 0021 wrote its speech emotion as dolphin.
    now = audio_events("s4", 1)[0].model_dump(mode="json")
    old = now | {"creature": "dolphin", "process": "speech_emotion"}
    settings.events_dir.mkdir(parents=True, exist_ok=True)
    (settings.events_dir / f"{STREAM}.jsonl").write_text(json.dumps(old) + "\n")
    assert await wait_stored(engine, 1) == [old["event_id"]]
    (row,) = await query(engine, "SELECT creature, process, zone FROM observability_events")
    assert row == {"creature": "hydra", "process": "ser-emotion", "zone": "listening"}
