"""The chronicler on its own, on a real PostgreSQL: the ring, subscribers falling behind,
batched persistence through an outage and past rows PostgreSQL refuses, warm start, retention."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from engine_harness import TOKEN, eventually
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from context_engine.config import Settings
from context_engine.observe.chronicler import Chronicler, EventFilter, EventRing
from context_engine.store.db import create_engine
from her_os_shared.events import ObservabilityEvent

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def ev(i: int, creature: str = "chimera", **kw: Any) -> ObservabilityEvent:
    return ObservabilityEvent.for_creature(
        creature, "metric", data={"i": i}, timestamp=T0 + timedelta(seconds=i), **kw
    )


def make_settings(db_url: str, **kw: Any) -> Settings:
    return Settings(internal_token=TOKEN, database_url=db_url, **kw)


@pytest.fixture
async def events_pool(db: AsyncEngine, db_url: str) -> AsyncIterator[AsyncEngine]:
    """The engine's events pool on the migrated test database."""
    eng = create_engine(make_settings(db_url), pool_size=2)
    yield eng
    await eng.dispose()


async def stored(db: AsyncEngine) -> list[dict[str, Any]]:
    async with db.connect() as conn:
        rows = await conn.execute(text("SELECT * FROM observability_events ORDER BY timestamp"))
        return [dict(r._mapping) for r in rows]


# --- the ring ---


def test_the_ring_keeps_the_last_n_by_arrival_number() -> None:
    ring = EventRing(3)
    assert len(ring) == 0 and ring.first_seq == 1 and ring.after(0, 10) == []
    evicted = [ring.append(ev(i), b"{}")[1] for i in range(5)]
    assert evicted[:3] == [None, None, None]
    assert [e.event.data["i"] for e in evicted[3:] if e] == [0, 1]
    assert len(ring) == 3 and (ring.first_seq, ring.last_seq) == (3, 5)
    assert [e.event.data["i"] for e in ring.after(0, 10)] == [2, 3, 4]
    assert [e.seq for e in ring.after(3, 10)] == [4, 5]
    assert [e.seq for e in ring.newest()] == [5, 4, 3]
    first = ring.get(3).event
    assert first.event_id in ring and ring.find(first.event_id) == 3
    gone = evicted[3]
    assert gone is not None and gone.event.event_id not in ring
    assert ring.find(gone.event.event_id) is None
    with pytest.raises(IndexError):
        ring.get(2)


async def test_the_ring_holds_its_capacity_and_queries_say_when_it_no_longer_covers(
    events_pool: AsyncEngine, db_url: str
) -> None:
    ch = Chronicler(events_pool, make_settings(db_url, events_ring_size=10))
    await ch.start()
    try:
        assert ch.covered_after is None  # an empty store: the ring holds all history
        ch.record([ev(i) for i in range(25)])
        assert len(ch.ring) == 10
        assert [e.event.data["i"] for e in ch.ring.after(0, 100)] == list(range(15, 25))
        # Events 0..14 left the ring: it now vouches only for what came after event 14.
        assert ch.covered_after == T0 + timedelta(seconds=14)

        recent = await ch.query(EventFilter(), limit=5, offset=0)
        assert recent["source"] == "buffer" and recent["next_offset"] == 5
        assert [e["data"]["i"] for e in recent["events"]] == [24, 23, 22, 21, 20]
        # The ring holds 10: a page reaching past them, or a range starting before the
        # ring's coverage, is PostgreSQL's to answer.
        deep = await ch.query(EventFilter(), limit=5, offset=10)
        assert deep["source"] == "db"
        assert [e["data"]["i"] for e in deep["events"]] == [14, 13, 12, 11, 10]
        old = await ch.query(EventFilter(since=T0), limit=100, offset=0)
        assert old["source"] == "db" and len(old["events"]) == 25
        assert old["next_offset"] is None
        late = await ch.query(EventFilter(since=T0 + timedelta(seconds=20)), limit=100, offset=0)
        assert late["source"] == "buffer" and len(late["events"]) == 5
    finally:
        await ch.stop()


async def test_a_retried_event_is_recorded_once(events_pool: AsyncEngine, db_url: str) -> None:
    ch = Chronicler(events_pool, make_settings(db_url))
    await ch.start()
    try:
        e = ev(1)
        assert ch.record([e, e]) == 1
        assert ch.record([e]) == 0
        assert len(ch.ring) == 1 and ch.counters.duplicates == 2
        assert await ch.flush()
    finally:
        await ch.stop()
    assert len(await stored(events_pool)) == 1


def test_an_invalid_in_process_event_is_logged_and_dropped_never_raised() -> None:
    ch = Chronicler(None, Settings(internal_token=TOKEN))  # type: ignore[arg-type]
    assert ch.record_event("no-such-creature", "start") is None
    assert ch.record_event("chimera", "no-such-type") is None
    assert ch.record_event("chimera", "error", reasoning="nul \x00 here") is None
    assert ch.counters.invalid == 3 and len(ch.ring) == 0
    event = ch.record_event("narwhal", "metric", data={"n": 1})
    assert event is not None and (event.service, event.zone) == ("context-engine", "thinking")


# --- subscribers ---


async def test_subscribers_get_new_events_and_a_lagging_one_is_told_what_it_lost() -> None:
    ch = Chronicler(None, Settings(internal_token=TOKEN, events_ring_size=5))  # type: ignore[arg-type]
    ch.record([ev(i) for i in range(3)])
    fast, catchup = ch.subscribe(EventFilter(), catchup=2)
    slow, _ = ch.subscribe(EventFilter(), catchup=0)
    # Catch-up frames are plain messages too, their JSON marked; each still a JSON object.
    assert catchup.count(b'"catchup":true}\n\n') == 2 and b'"i":2' in catchup
    assert b"event:" not in catchup
    frames = [line[6:] for line in catchup.split(b"\n") if line.startswith(b"data: ")]
    assert [json.loads(f)["catchup"] for f in frames] == [True, True]
    assert ch.subscribers == 2

    ch.record([ev(3)])
    chunk = await asyncio.wait_for(fast.next_chunk(), 5)
    assert chunk is not None and chunk.startswith(b"id: ") and b'"i":3' in chunk
    assert b"event:" not in chunk  # live events are plain SSE messages

    # `slow` reads nothing while 8 more events arrive: the ring (5) overwrote 4 it never read.
    ch.record([ev(i) for i in range(4, 12)])
    chunk = await asyncio.wait_for(slow.next_chunk(), 5)
    assert chunk is not None
    assert chunk.startswith(b'event: dropped\ndata: {"dropped": 4}\n\n')
    assert [int(x) for x in _is(chunk)] == [7, 8, 9, 10, 11]
    assert slow.dropped == 4 and ch.counters.subscriber_drops == 4
    # The fast one was not held back by the slow one, and lost nothing it kept up with.
    chunk = await asyncio.wait_for(fast.next_chunk(), 5)
    assert chunk is not None and fast.dropped == 3  # it had read event 3 in time
    # A filter: nothing matches, so the subscriber waits (and is woken by a match).
    only_seahorse, _ = ch.subscribe(EventFilter(creatures=frozenset({"seahorse"})))
    ch.record([ev(12)])
    waiting = asyncio.create_task(only_seahorse.next_chunk())
    await asyncio.sleep(0)
    assert not waiting.done()
    ch.record([ev(20, "seahorse")])
    chunk = await asyncio.wait_for(waiting, 5)
    assert chunk is not None and chunk.count(b"id: ") == 1 and b'"seahorse"' in chunk

    ch.unsubscribe(slow)
    assert ch.subscribers == 2
    await ch.stop()  # no pool to write to: the pending events are counted as dropped
    assert await asyncio.wait_for(fast.next_chunk(), 5) is None


async def test_a_resumed_subscriber_gets_what_followed_its_last_event() -> None:
    ch = Chronicler(None, Settings(internal_token=TOKEN, events_ring_size=100))  # type: ignore[arg-type]
    events = [ev(i) for i in range(10)]
    ch.record(events)
    sub, first = ch.subscribe(EventFilter(), last_event_id=events[6].event_id)
    assert first == b""
    chunk = await asyncio.wait_for(sub.next_chunk(), 5)
    assert chunk is not None and [int(x) for x in _is(chunk)] == [7, 8, 9]
    # An id the ring does not hold: the usual catch-up instead.
    _, first = ch.subscribe(EventFilter(), last_event_id="f" * 32, catchup=3)
    assert first.count(b'"catchup":true}') == 3


def _is(chunk: bytes) -> list[bytes]:
    return re.findall(rb'"i":(\d+)', chunk)


# --- persistence ---


async def _set_connections(db_url: str, allowed: bool) -> None:
    """Make the test database refuse (or accept again) every connection: a real outage."""
    url = make_url(db_url)
    name = url.database
    host = url.query["host"]
    conn = await asyncpg.connect(host=host, user=url.username, database="postgres")
    try:
        await conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS {str(allowed).lower()}')
        if not allowed:
            await conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1",
                name,
            )
    finally:
        await conn.close()


async def test_events_recorded_during_an_outage_are_written_when_postgresql_is_back(
    events_pool: AsyncEngine, db: AsyncEngine, db_url: str
) -> None:
    ch = Chronicler(
        events_pool,
        make_settings(
            db_url, events_flush_interval_s=0.05, events_backlog_max=6, health_timeout_s=1
        ),
    )
    await ch.start()
    try:
        await _set_connections(db_url, allowed=False)
        try:
            # Callers never fail, and never wait for PostgreSQL.
            for i in range(9):
                assert ch.record_event("chimera", "metric", data={"i": i}) is not None
            assert not await ch.flush()
            # The backlog is bounded: the 3 oldest are dropped (and counted), 6 wait.
            assert ch.backlog == 6 and ch.counters.persist_dropped == 3
            assert ch.counters.persist_failures >= 1
            # The ring still has everything: the live stream and recent queries go on.
            assert len(ch.ring) == 9
        finally:
            await _set_connections(db_url, allowed=True)

        async def written() -> list[dict[str, Any]] | None:
            rows = await stored(db)
            return rows if len(rows) == 6 and ch.backlog == 0 else None

        rows = await eventually(written, "the backlog to be written")
        assert sorted(r["data"]["i"] for r in rows) == [3, 4, 5, 6, 7, 8]
        assert ch.counters.persisted == 6
    finally:
        await ch.stop()


async def test_a_row_postgresql_refuses_is_dropped_and_the_rest_of_its_batch_written(
    events_pool: AsyncEngine, db: AsyncEngine, db_url: str
) -> None:
    async with db.begin() as conn:  # a real refusal of one valid event
        await conn.execute(
            text(
                "ALTER TABLE observability_events ADD CONSTRAINT no_refuse_me"
                " CHECK (reasoning IS DISTINCT FROM 'refuse me')"
            )
        )
    ch = Chronicler(events_pool, make_settings(db_url))
    await ch.start()
    try:
        ch.record_event("chimera", "start", data={"i": 1})
        ch.record_event("chimera", "error", reasoning="refuse me")
        ch.record_event("chimera", "complete", data={"i": 3})
        assert await ch.flush()
        assert ch.counters.persisted == 2 and ch.counters.persist_dropped == 1
        assert ch.backlog == 0
    finally:
        await ch.stop()
    assert [r["event_type"] for r in await stored(db)] == ["start", "complete"]


async def test_the_ring_is_filled_from_postgresql_at_start(
    events_pool: AsyncEngine, db_url: str
) -> None:
    first = Chronicler(events_pool, make_settings(db_url))
    await first.start()
    first.record([ev(i) for i in range(12)])
    await first.stop()

    # A smaller ring after the restart: it takes the newest, and knows it holds no more.
    again = Chronicler(events_pool, make_settings(db_url, events_ring_size=8))
    early = ev(100)
    again.record([early])  # recorded before the ring was warmed: kept, after the stored ones
    await again.start()
    try:
        held = [e.event.data["i"] for e in again.ring.after(0, 100)]
        assert held == [5, 6, 7, 8, 9, 10, 11, 100]
        assert again.covered_after == T0 + timedelta(seconds=4)
        _, catchup = again.subscribe(EventFilter(), catchup=3)
        assert [int(x) for x in _is(catchup)] == [10, 11, 100]
    finally:
        await again.stop()


async def test_retention_deletes_only_events_older_than_the_cutoff(
    events_pool: AsyncEngine, db: AsyncEngine, db_url: str
) -> None:
    ch = Chronicler(events_pool, make_settings(db_url, events_retention_batch=3))
    await ch.start()
    try:
        ch.record([ev(i) for i in range(10)])
        assert await ch.flush()
        deleted = await ch.purge(T0 + timedelta(seconds=7))  # batches of 3: 3 + 3 + 1
        assert deleted == 7
        assert [r["data"]["i"] for r in await stored(db)] == [7, 8, 9]
        assert await ch.purge(T0 + timedelta(seconds=7)) == 0
    finally:
        await ch.stop()
