"""The idempotency keys' PostgreSQL store (store/idempotency.py, migration 0016) on a real,
migrated database: one claim wins a race, an answer is kept for its owner only, a failed
request's claim is dropped, an expired or abandoned record is taken over, old ones purged."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncEngine

from context_engine.store.idempotency import PgIdempotencyStore
from her_os_shared.idempotency import Record

SCOPE = "POST /v1/memories"
T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
EARLIER = T0 - timedelta(days=30)


def record(owner: str, at: datetime = T0, request: str = "fp-a") -> Record:
    return Record(request, owner, at)


async def claim(store: PgIdempotencyStore, rec: Record, key: str = "k") -> Record | None:
    return await store.claim(
        SCOPE, key, rec, replace_before=rec.created_at - timedelta(days=1),
        abandoned_before=rec.created_at - timedelta(minutes=1),
    )  # fmt: skip


async def test_one_claim_wins_a_race_and_keeps_its_answer(db: AsyncEngine) -> None:
    store = PgIdempotencyStore(db)
    results = await asyncio.gather(*(claim(store, record(f"owner-{i}")) for i in range(4)))
    winners = [i for i, found in enumerate(results) if found is None]
    assert len(winners) == 1
    winner = f"owner-{winners[0]}"
    assert {f.owner for f in results if f is not None} == {winner}
    assert all(f.status is None for f in results if f is not None)  # still running
    # Only the owner's answer is kept.
    await store.finish(SCOPE, "k", "someone-else", 500, b"{}")
    await store.finish(SCOPE, "k", winner, 201, b'{"session_id":"s1"}')
    found = await claim(store, record("late"))
    assert found is not None
    assert (found.fingerprint, found.status, found.body) == ("fp-a", 201, b'{"session_id":"s1"}')
    # An answered claim is not released.
    await store.release(SCOPE, "k", winner)
    assert (await claim(store, record("later"))) is not None


async def test_a_released_claim_frees_the_key(db: AsyncEngine) -> None:
    store = PgIdempotencyStore(db)
    assert await claim(store, record("first")) is None
    await store.release(SCOPE, "k", "not-the-owner")
    assert await claim(store, record("second")) is not None
    await store.release(SCOPE, "k", "first")
    assert await claim(store, record("second", request="fp-b")) is None


async def test_expired_and_abandoned_records_are_taken_over_and_purged(db: AsyncEngine) -> None:
    store = PgIdempotencyStore(db)
    # An answered record of a month ago (past the window), and a claim abandoned an hour ago.
    assert await claim(store, record("old", EARLIER), key="answered") is None
    await store.finish(SCOPE, "answered", "old", 201, b"{}")
    assert await claim(store, record("dead", T0 - timedelta(hours=1)), key="abandoned") is None
    for key in ("answered", "abandoned"):
        assert await claim(store, record("new", request="fp-b"), key=key) is None, key
    # Not every old record is taken over: an answered one within the window stays.
    assert await claim(store, record("fresh", T0 - timedelta(hours=1)), key="kept") is None
    await store.finish(SCOPE, "kept", "fresh", 201, b"{}")
    assert await claim(store, record("again"), key="kept") is not None
    assert await store.purge(T0 - timedelta(minutes=30)) == 1  # "kept" only
    assert await store.purge(T0 + timedelta(minutes=1)) == 2
