"""Idempotent writes (idempotency.py) on the SQLite store: a repeat answers the first answer
and runs nothing; concurrent repeats run once; another request under the key is a 409;
failures keep nothing; the window expires (the clock is injected, never slept on); a claim
survives a restart and is waited for, then answered, across processes; an abandoned claim
is taken over; keys are checked without echoing them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi import HTTPException

from her_os_shared.idempotency import (
    DEFAULT_WINDOW_S,
    MAX_KEY_CHARS,
    REPLAYED_HEADER,
    Answer,
    Idempotency,
    InvalidIdempotencyKeyError,
    Record,
    check_key,
    fingerprint,
)
from her_os_shared.idempotency_sqlite import SqliteIdempotencyStore

SCOPE = "POST /things"
T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
DEADLINE_S = 10.0


class Clock:
    def __init__(self, now: datetime = T0) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


class Writes:
    """The operation: counts its runs, each answering its number; `gate` holds them; the
    runs numbered in `failing` raise."""

    def __init__(self) -> None:
        self.runs = 0
        self.gate = asyncio.Event()
        self.gate.set()
        self.failing: dict[int, Exception] = {}

    async def __call__(self) -> Answer:
        self.runs += 1
        run = self.runs
        await self.gate.wait()
        if run in self.failing:
            raise self.failing[run]
        return Answer.json(201, {"run": run})


class CountingStore(SqliteIdempotencyStore):
    """The SQLite store, recording what each claim found (None: claimed)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.found: list[Record | None] = []

    async def claim(self, *args, **kwargs) -> Record | None:  # type: ignore[no-untyped-def]
        found = await super().claim(*args, **kwargs)
        self.found.append(found)
        return found


async def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


def coordinator(path: Path, clock: Clock, **kw: float) -> Idempotency:
    return Idempotency(SqliteIdempotencyStore(path), clock=clock, **kw)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "idempotency.sqlite3"


async def test_a_repeat_answers_the_first_answer_and_runs_nothing(path: Path) -> None:
    idem, writes = coordinator(path, Clock()), Writes()
    first = await idem.run(SCOPE, "k1", fingerprint({"a": 1}), writes)
    again = await idem.run(SCOPE, "k1", fingerprint({"a": 1}), writes)
    assert writes.runs == 1
    assert (first.status, first.body, first.replayed) == (201, b'{"run":1}', False)
    assert (again.status, again.body, again.replayed) == (201, b'{"run":1}', True)
    assert again.response().headers[REPLAYED_HEADER] == "true"
    assert REPLAYED_HEADER.lower() not in first.response().headers
    # Another key, or the same key in another scope, is another request.
    await idem.run(SCOPE, "k2", fingerprint({"a": 1}), writes)
    await idem.run("POST /other", "k1", fingerprint({"a": 1}), writes)
    assert writes.runs == 3


async def test_without_a_key_every_request_runs(path: Path) -> None:
    idem, writes = coordinator(path, Clock()), Writes()
    for _ in range(2):
        response = await idem.respond(SCOPE, None, fingerprint({}), writes)
        assert response.status_code == 201
    assert writes.runs == 2
    assert not await asyncio.to_thread(path.exists)  # nothing was kept


async def test_concurrent_repeats_run_once_and_share_the_answer(path: Path) -> None:
    idem, writes = coordinator(path, Clock()), Writes()
    writes.gate.clear()
    same = fingerprint({"a": 1})
    racing = asyncio.gather(*(idem.run(SCOPE, "k", same, writes) for _ in range(3)))
    await until(lambda: writes.runs == 1, "the first run")
    writes.gate.set()
    answers = await racing
    assert writes.runs == 1
    assert {a.body for a in answers} == {b'{"run":1}'}
    assert sorted(a.replayed for a in answers) == [False, True, True]


async def test_another_request_under_the_key_is_a_409(path: Path) -> None:
    idem, writes = coordinator(path, Clock()), Writes()
    await idem.run(SCOPE, "k", fingerprint({"a": 1}), writes)
    with pytest.raises(HTTPException) as refused:
        await idem.run(SCOPE, "k", fingerprint({"a": 2}), writes)
    assert refused.value.status_code == 409
    assert "different request" in refused.value.detail
    # Also while the first is still running.
    writes.gate.clear()
    running = asyncio.ensure_future(idem.run(SCOPE, "k2", fingerprint({"a": 1}), writes))
    await until(lambda: writes.runs == 2, "the second key's run")
    with pytest.raises(HTTPException) as busy:
        await idem.run(SCOPE, "k2", fingerprint({"a": 2}), writes)
    assert busy.value.status_code == 409
    writes.gate.set()
    await running
    assert writes.runs == 2


async def test_a_failure_keeps_nothing_and_the_retry_runs(path: Path) -> None:
    idem, writes = coordinator(path, Clock()), Writes()
    writes.failing[1] = HTTPException(422, "bad")
    with pytest.raises(HTTPException):
        await idem.run(SCOPE, "k", fingerprint({}), writes)
    answer = await idem.run(SCOPE, "k", fingerprint({}), writes)
    assert (answer.body, answer.replayed) == (b'{"run":2}', False)


async def test_a_concurrent_repeat_of_a_failure_runs_on_its_own(path: Path) -> None:
    idem, writes = coordinator(path, Clock()), Writes()
    writes.gate.clear()
    writes.failing[1] = RuntimeError("disk full")
    first = asyncio.ensure_future(idem.run(SCOPE, "k", fingerprint({}), writes))
    await until(lambda: writes.runs == 1, "the first run")
    second = asyncio.ensure_future(idem.run(SCOPE, "k", fingerprint({}), writes))
    await asyncio.sleep(0)  # it starts, and waits on the first's task
    writes.gate.set()
    with pytest.raises(RuntimeError):
        await first
    answer = await second
    assert (answer.body, answer.replayed) == (b'{"run":2}', False)


async def test_the_window_expires(path: Path) -> None:
    clock = Clock()
    idem, writes = coordinator(path, clock, window_s=3600), Writes()
    await idem.run(SCOPE, "k", fingerprint({"a": 1}), writes)
    clock.now = T0 + timedelta(minutes=59)
    assert (await idem.run(SCOPE, "k", fingerprint({"a": 1}), writes)).replayed
    clock.now = T0 + timedelta(minutes=61)
    # Expired: the key is free again, for any request.
    fresh = await idem.run(SCOPE, "k", fingerprint({"a": 2}), writes)
    assert (fresh.body, fresh.replayed) == (b'{"run":2}', False)


async def test_expired_records_are_purged(path: Path) -> None:
    clock = Clock()
    store = SqliteIdempotencyStore(path)
    idem, writes = Idempotency(store, window_s=3600, clock=clock), Writes()
    await idem.run(SCOPE, "old", fingerprint({}), writes)
    clock.now = T0 + timedelta(hours=2)
    assert await store.purge(clock.now - timedelta(hours=1)) == 1
    assert await store.purge(clock.now - timedelta(hours=1)) == 0


async def test_kept_answers_survive_a_restart(path: Path) -> None:
    writes = Writes()
    await coordinator(path, Clock()).run(SCOPE, "k", fingerprint({"a": 1}), writes)
    restarted = coordinator(path, Clock())  # a new process: nothing in memory
    again = await restarted.run(SCOPE, "k", fingerprint({"a": 1}), writes)
    assert (again.body, again.replayed, writes.runs) == (b'{"run":1}', True, 1)
    with pytest.raises(HTTPException) as refused:
        await restarted.run(SCOPE, "k", fingerprint({"a": 2}), writes)
    assert refused.value.status_code == 409


async def test_a_repeat_waits_for_the_first_in_another_process(path: Path) -> None:
    clock = Clock()
    one, writes = coordinator(path, clock), Writes()
    other_store = CountingStore(path)
    other = Idempotency(other_store, clock=clock)
    writes.gate.clear()
    first = asyncio.ensure_future(one.run(SCOPE, "k", fingerprint({}), writes))
    await until(lambda: writes.runs == 1, "the first run")
    second = asyncio.ensure_future(other.run(SCOPE, "k", fingerprint({}), writes))
    # The other process finds the claim unanswered, and keeps asking.
    await until(lambda: len(other_store.found) >= 2, "the second to poll")
    assert all(f is not None and f.status is None for f in other_store.found)
    writes.gate.set()
    assert (await first).replayed is False
    answer = await second
    assert (answer.body, answer.replayed, writes.runs) == (b'{"run":1}', True, 1)


async def test_a_repeat_that_waited_too_long_is_a_409_to_retry(path: Path) -> None:
    clock = Clock()
    one, writes = coordinator(path, clock), Writes()
    other = coordinator(path, clock, wait_s=0)
    writes.gate.clear()
    first = asyncio.ensure_future(one.run(SCOPE, "k", fingerprint({}), writes))
    await until(lambda: writes.runs == 1, "the first run")
    with pytest.raises(HTTPException) as busy:
        await other.run(SCOPE, "k", fingerprint({}), writes)
    assert busy.value.status_code == 409 and "still being processed" in busy.value.detail
    assert busy.value.headers == {"Retry-After": "1"}
    writes.gate.set()
    await first


async def test_an_abandoned_claim_is_taken_over(path: Path) -> None:
    clock = Clock()
    store = SqliteIdempotencyStore(path)
    # A process claimed the key and died before answering.
    dead = Record(fingerprint({}), "dead-process", T0)
    assert await store.claim(SCOPE, "k", dead, replace_before=T0, abandoned_before=T0) is None
    idem, writes = Idempotency(store, clock=clock, abandoned_s=60, wait_s=0), Writes()
    clock.now = T0 + timedelta(seconds=30)
    with pytest.raises(HTTPException):  # still its own for now
        await idem.run(SCOPE, "k", fingerprint({}), writes)
    clock.now = T0 + timedelta(seconds=61)
    answer = await idem.run(SCOPE, "k", fingerprint({}), writes)
    assert (answer.body, answer.replayed) == (b'{"run":1}', False)
    # The dead process's late answer changes nothing: the claim is no longer its own.
    await store.finish(SCOPE, "k", "dead-process", 500, b"{}")
    assert (await idem.run(SCOPE, "k", fingerprint({}), writes)).body == b'{"run":1}'


async def test_a_caller_that_gives_up_leaves_the_write_to_finish(path: Path) -> None:
    idem, writes = coordinator(path, Clock()), Writes()
    writes.gate.clear()
    caller = asyncio.ensure_future(idem.run(SCOPE, "k", fingerprint({}), writes))
    await until(lambda: writes.runs == 1, "the run")
    caller.cancel()
    writes.gate.set()
    again = await idem.run(SCOPE, "k", fingerprint({}), writes)
    assert (again.body, again.replayed, writes.runs) == (b'{"run":1}', True, 1)


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("", "must not be empty"),
        ("k" * (MAX_KEY_CHARS + 1), f"at most {MAX_KEY_CHARS} characters"),
        ("tab\there", "printable ASCII"),
        ("nul\x00", "printable ASCII"),
        ("clé-ünïcode", "printable ASCII"),
        (" padded", "printable ASCII"),
    ],
)
def test_a_malformed_key_says_why_without_echoing_it(key: str, reason: str) -> None:
    with pytest.raises(InvalidIdempotencyKeyError) as bad:
        check_key(key)
    assert reason in str(bad.value)
    assert not key or key not in str(bad.value)


def test_usable_keys() -> None:
    for key in ("a", "8e03978e-40d5-43e8-bc93-6894a57f9324", "k" * MAX_KEY_CHARS, "a b~!"):
        assert check_key(key) == key
    assert DEFAULT_WINDOW_S == 24 * 3600


def test_the_same_request_has_the_same_fingerprint() -> None:
    assert fingerprint({"a": 1, "b": [1, 2]}) == fingerprint({"b": [1, 2], "a": 1})
    assert fingerprint({"a": 1}) != fingerprint({"a": 2})
    assert fingerprint({}, b"\x00\x01") != fingerprint({}, b"\x00\x02")
    assert fingerprint({}, b"") != fingerprint({}, b"\x00")
