"""The chronicler (narwhal): every observability event of her-os is recorded, streamed live
and kept (issue 8).

Three ways in, one path out:

- in process, `record_event(creature, event_type, …)` (the engine's modules, through
  `EventRecorder.emit`), creature metadata from the shared registry;
- `POST /v1/events/emit` (other services, e.g. annie-voice), each event validated on its own;
- the audio pipeline's JSONL event files (event_files.py), stored first, then published here.

Every event lands in the ring (the last `events_ring_size` events, in memory) and wakes the
live subscribers; all but the file events (already stored) are then queued for PostgreSQL.

Design (docs/architecture.md, "The chronicler"):

- **The ring is the subscribers' buffer.** Events are numbered as they arrive; the ring keeps
  the last N by number, so entry `seq` sits at `seq % N` (a fixed list, not a deque: a
  subscriber reads from its own position in O(1)). A subscriber is a cursor into the ring, not
  a queue: recording costs the same for 1 subscriber as for 100 and never waits for any of
  them. A subscriber that falls more than N events behind (its socket is not drained) has lost
  the events the ring overwrote: it is told how many (an SSE `dropped` event) and the drop is
  counted and logged; the others are untouched. A disconnected browser resumes with
  `Last-Event-ID` from the ring, so a reconnect within the ring's span loses nothing.
- **Persistence never fails the caller.** Recording is synchronous and in memory; a background
  task writes batches (every `events_flush_interval_s` or `events_flush_batch` events) through
  the events pool, `ON CONFLICT (event_id) DO NOTHING`. While PostgreSQL fails, the backlog is
  kept (at most `events_backlog_max`; past that the oldest are dropped and counted) and retried
  with backoff; a batch that fails while PostgreSQL answers is written row by row and the rows
  it still refuses are dropped with their reason logged.
- **Queries** (`GET /v1/events`) are answered from the ring when it holds every matching event
  of the page asked for, else from PostgreSQL. `covered_after` tracks that: every event with a
  timestamp after it is in the ring (None: the ring holds all history). At start the ring is
  filled with the newest stored events, so a restart keeps the catch-up and the recent history.
  A query may also name its source (the design's `buffer`, `db`): the ring alone, or
  PostgreSQL alone.
- **Catch-up frames are plain messages** (no `event:` line), as the design's EventSource
  client reads them (`onmessage`); their JSON carries `"catchup": true` so a client can tell
  them from live events.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import ValidationError
from sqlalchemy import delete, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncEngine

from context_engine.config import Settings
from context_engine.store.db import ping
from context_engine.store.models import ObservabilityEventRow
from her_os_shared.errors import describe_validation_error
from her_os_shared.events import EventType, ObservabilityEvent, normalize_event_id
from her_os_shared.logging import get_logger

log = get_logger(__name__)

# Live events per chunk written to one subscriber (a subscriber far behind gets several).
MAX_CHUNK_EVENTS = 1000
# EventSource waits this long before reconnecting (then resumes with Last-Event-ID).
RECONNECT_MS = 1000
WRITE_TIMEOUT_S = 10.0
RETRY_MAX_S = 10.0
_EVENTS = ObservabilityEventRow.__table__
_INSERT = pg_insert(ObservabilityEventRow).on_conflict_do_nothing(index_elements=["event_id"])
# Where a query reads: `auto` the ring when it holds the whole page, else PostgreSQL.
EventSource = Literal["auto", "buffer", "db"]
_CATCHUP_MARK = b',"catchup":true}'


class InvalidEventError(ValueError):
    """An event the chronicler refuses; the message says why."""


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False


def check_storable(event: ObservabilityEvent) -> None:
    """PostgreSQL text and JSONB cannot hold NUL: refuse such an event up front, so it can
    never poison a batch later."""
    if _has_nul(event.reasoning) or _has_nul(event.data) or _has_nul(event.process):
        raise InvalidEventError("contains a NUL character (\\u0000), which cannot be stored")


def validate_event(raw: Any) -> ObservabilityEvent:
    """One event of `POST /v1/events/emit`; InvalidEventError names the field and the reason."""
    if not isinstance(raw, dict):
        raise InvalidEventError(f"an event must be a JSON object, not {type(raw).__name__}")
    try:
        event = ObservabilityEvent.model_validate(raw)
    except ValidationError as exc:
        raise InvalidEventError(describe_validation_error(exc)) from None
    check_storable(event)
    return event


def event_row(event: ObservabilityEvent) -> dict[str, Any]:
    return event.model_dump(mode="python", exclude={"schema_version"})


def row_to_dict(row: Any) -> dict[str, Any]:
    """A stored event as the API answers it (the contract's fields)."""
    m = row._mapping
    return {
        "schema_version": 1,
        "event_id": m["event_id"],
        "timestamp": m["timestamp"],
        "service": m["service"],
        "process": m["process"],
        "creature": m["creature"],
        "zone": m["zone"],
        "event_type": m["event_type"],
        "session_id": m["session_id"],
        "data": m["data"],
        "reasoning": m["reasoning"],
    }


@dataclass(frozen=True, slots=True)
class Entry:
    """A recorded event: its arrival number, the event and its JSON (encoded once, shared
    by every subscriber's frames)."""

    seq: int
    event: ObservabilityEvent
    data: bytes

    def frame(self) -> bytes:
        """A live event: no `event:` line, so EventSource dispatches it as "message"."""
        return b"id: %s\ndata: %s\n\n" % (self.event.event_id.encode(), self.data)

    def catchup_frame(self) -> bytes:
        """An event from before the subscriber connected: a plain message too (EventSource's
        `onmessage` gets it), its JSON marked `"catchup": true` (the event's JSON is an
        object: the mark goes before its closing brace)."""
        data = self.data[:-1] + _CATCHUP_MARK
        return b"id: %s\ndata: %s\n\n" % (self.event.event_id.encode(), data)


class EventRing:
    """The last `capacity` entries, addressed by arrival number (1, 2, …)."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._buf: list[Entry | None] = [None] * capacity
        self.last_seq = 0  # number of the newest entry; 0 = empty
        self._ids: set[str] = set()

    @property
    def first_seq(self) -> int:
        """Number of the oldest entry still held (last_seq + 1 when empty)."""
        return max(1, self.last_seq - self.capacity + 1)

    def __len__(self) -> int:
        return self.last_seq - self.first_seq + 1

    def __contains__(self, event_id: object) -> bool:
        return event_id in self._ids

    def append(self, event: ObservabilityEvent, data: bytes) -> tuple[Entry, Entry | None]:
        """Add an event; returns its entry and the entry it overwrote (None while not full)."""
        self.last_seq += 1
        entry = Entry(self.last_seq, event, data)
        slot = self.last_seq % self.capacity
        evicted = self._buf[slot]
        if evicted is not None:
            self._ids.discard(evicted.event.event_id)
        self._buf[slot] = entry
        self._ids.add(event.event_id)
        return entry, evicted

    def get(self, seq: int) -> Entry:
        if not self.first_seq <= seq <= self.last_seq:
            raise IndexError(seq)
        entry = self._buf[seq % self.capacity]
        assert entry is not None
        return entry

    def after(self, seq: int, limit: int) -> list[Entry]:
        """Entries numbered after `seq` (from the oldest held), at most `limit`, oldest first."""
        start = max(seq + 1, self.first_seq)
        stop = min(self.last_seq, start + limit - 1)
        return [self.get(s) for s in range(start, stop + 1)]

    def newest(self) -> Iterator[Entry]:
        """Entries newest first."""
        for s in range(self.last_seq, self.first_seq - 1, -1):
            yield self.get(s)

    def find(self, event_id: str) -> int | None:
        """The number of the entry of `event_id`, if the ring holds it."""
        if event_id not in self._ids:
            return None
        return next((e.seq for e in self.newest() if e.event.event_id == event_id), None)


@dataclass(frozen=True, slots=True)
class EventFilter:
    """Which events a query or a subscriber wants; None = any."""

    creatures: frozenset[str] | None = None
    services: frozenset[str] | None = None
    event_types: frozenset[str] | None = None
    session_id: str | None = None
    since: datetime | None = None  # inclusive
    until: datetime | None = None  # exclusive

    def matches(self, e: ObservabilityEvent) -> bool:
        return (
            (self.creatures is None or e.creature in self.creatures)
            and (self.services is None or e.service in self.services)
            and (self.event_types is None or e.event_type in self.event_types)
            and (self.session_id is None or e.session_id == self.session_id)
            and (self.since is None or e.timestamp >= self.since)
            and (self.until is None or e.timestamp < self.until)
        )


@dataclass
class Counters:
    recorded: int = 0  # events that entered the ring
    duplicates: int = 0  # events whose id the ring already held (not recorded again)
    persisted: int = 0  # rows written (or already there) by the persistence task
    persist_dropped: int = 0  # events never written: backlog overflow, refused row, shutdown
    persist_failures: int = 0  # failed batch writes (each retried)
    subscriber_drops: int = 0  # events subscribers lost by falling a ring behind
    invalid: int = 0  # in-process events refused (a bug in the caller)


@dataclass(eq=False)
class Subscription:
    """A live stream's position in the ring. `next_chunk` waits for what follows it."""

    chronicler: Chronicler
    cursor: int
    filter: EventFilter
    client: str | None = None
    dropped: int = 0
    delivered: int = 0
    closed: bool = False

    async def next_chunk(self) -> bytes | None:
        """SSE frames of the events after the cursor (at least one frame); None once the
        chronicler stops."""
        ch = self.chronicler
        while True:
            if self.closed or ch.closing:
                return None
            ring = ch.ring
            if ring.last_seq > self.cursor:
                parts: list[bytes] = []
                lost = ring.first_seq - self.cursor - 1
                if lost > 0:  # the ring overwrote them before this subscriber read them
                    self.dropped += lost
                    ch.counters.subscriber_drops += lost
                    log.warning("events.subscriber_lagged", client=self.client, dropped=lost,
                                dropped_total=self.dropped)  # fmt: skip
                    parts.append(b'event: dropped\ndata: {"dropped": %d}\n\n' % lost)
                entries = ring.after(self.cursor, MAX_CHUNK_EVENTS)
                self.cursor = entries[-1].seq
                for e in entries:
                    if self.filter.matches(e.event):
                        parts.append(e.frame())
                        self.delivered += 1
                if parts:
                    return b"".join(parts)
                continue
            await ch.changed()


class Chronicler:
    def __init__(self, engine: AsyncEngine, settings: Settings) -> None:
        self.engine = engine  # the events pool
        self.settings = settings
        self.ring = EventRing(settings.events_ring_size)
        self.counters = Counters()
        self.covered_after: datetime | None = None
        self.warmed = asyncio.Event()
        self.closing = False
        self._changed = asyncio.Event()
        self._subscribers: set[Subscription] = set()
        self._pending: deque[dict[str, Any]] = deque()
        self._wake = asyncio.Event()
        self._write_lock = asyncio.Lock()
        self._flusher: asyncio.Task[None] | None = None

    # --- recording ---------------------------------------------------------------------

    def record_event(
        self,
        creature: str,
        event_type: EventType | str,
        *,
        session_id: str | None = None,
        data: dict[str, Any] | None = None,
        reasoning: str | None = None,
        timestamp: datetime | None = None,
    ) -> ObservabilityEvent | None:
        """Record an event of this process; service, process and zone come from the creature
        registry. Never raises: an invalid event (a bug in the caller) is logged and dropped."""
        try:
            event = ObservabilityEvent.for_creature(
                creature, event_type, session_id=session_id, data=data, reasoning=reasoning,
                timestamp=timestamp,
            )  # fmt: skip
            check_storable(event)
        except (ValueError, KeyError) as exc:
            self.counters.invalid += 1
            log.error("events.invalid", creature=creature, error=str(exc)[:500])
            return None
        self.record([event])
        return event

    def record(self, events: Iterable[ObservabilityEvent]) -> int:
        """Ring, subscribers, then the persistence queue. Returns how many were new (an event
        whose id the ring holds is a retry: counted, not recorded twice)."""
        fresh = self.publish(events)
        for event in fresh:
            if len(self._pending) >= self.settings.events_backlog_max:
                self._pending.popleft()
                self._backlog_overflow(1)
            self._pending.append(event_row(event))
        if len(self._pending) >= self.settings.events_flush_batch:
            self._wake.set()
        return len(fresh)

    def publish(self, events: Iterable[ObservabilityEvent]) -> list[ObservabilityEvent]:
        """Ring and subscribers only (the caller has stored the events); returns the new ones."""
        fresh: list[ObservabilityEvent] = []
        for event in events:
            if event.event_id in self.ring:
                self.counters.duplicates += 1
                continue
            _, evicted = self.ring.append(event, event.model_dump_json().encode())
            if evicted is not None:
                self._uncover(evicted.event.timestamp)
            fresh.append(event)
        self.counters.recorded += len(fresh)
        if fresh:
            self._notify()
        return fresh

    def forget(self, goes: Callable[[str | None, str], bool]) -> tuple[int, int]:
        """Take the events `goes(session_id, its JSON)` picks out of the ring and the unwritten
        backlog (forgetting, forget.py). The ring is rebuilt from what stays; each
        subscriber's cursor moves to the last kept event it had read, so it neither repeats
        nor misses one. Returns (taken from the ring, taken from the backlog)."""
        old = self.ring
        entries = old.after(0, old.capacity)
        kept = [e for e in entries if not goes(e.event.session_id, e.data.decode())]
        if len(kept) < len(old):
            ring = EventRing(old.capacity)
            new_seq: dict[int, int] = {}
            for e in kept:
                new_seq[e.seq] = ring.append(e.event, e.data)[0].seq
            for sub in self._subscribers:
                read = [n for s, n in new_seq.items() if s <= sub.cursor]
                sub.cursor = max(read, default=0)
            self.ring = ring
        before = len(self._pending)
        self._pending = deque(
            r
            for r in self._pending
            if not goes(r.get("session_id"), json.dumps(r, default=str, ensure_ascii=False))
        )
        return len(old) - len(kept), before - len(self._pending)

    def _uncover(self, timestamp: datetime) -> None:
        if self.covered_after is None or timestamp > self.covered_after:
            self.covered_after = timestamp

    def _notify(self) -> None:
        # One Event per generation: every waiter of the old one wakes, and each waiter's own
        # wait() future means a cancelled subscriber cannot cancel the others' wake-up.
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def changed(self) -> None:
        """Wait for the next recording (or the chronicler stopping)."""
        await self._changed.wait()

    def emit(self, raw_events: list[Any]) -> dict[str, Any]:
        """`POST /v1/events/emit`: validate each event on its own, record the valid ones
        (an event id already in the ring counts as accepted: a client's retry)."""
        accepted: list[ObservabilityEvent] = []
        errors: list[dict[str, Any]] = []
        for i, raw in enumerate(raw_events):
            try:
                accepted.append(validate_event(raw))
            except InvalidEventError as exc:
                errors.append({"index": i, "error": str(exc)})
        self.record(accepted)
        if errors:
            log.info("events.emit_rejected", rejected=len(errors), total=len(raw_events),
                     first=errors[0]["error"][:300])  # fmt: skip
        # `rejected` is the design's count; `errors` says which were refused and why.
        return {
            "accepted": len(accepted),
            "rejected": len(errors),
            "total": len(raw_events),
            "errors": errors,
        }

    # --- subscribers -------------------------------------------------------------------

    def subscribe(
        self,
        flt: EventFilter,
        *,
        last_event_id: str | None = None,
        catchup: int | None = None,
        client: str | None = None,
    ) -> tuple[Subscription, bytes]:
        """A new live subscriber and the frames to send it first: the events after
        `last_event_id` when the ring still holds it (a resume: sent as live events),
        otherwise the newest `catchup` matching events, as `catchup` events."""
        n = self.settings.events_catchup if catchup is None else catchup
        resume = self.ring.find(_stored_id(last_event_id)) if last_event_id else None
        found: list[Entry] = []
        if resume is not None:
            sub = Subscription(self, resume, flt, client)
        else:
            sub = Subscription(self, self.ring.last_seq, flt, client)
            if n > 0:
                for e in self.ring.newest():
                    if flt.matches(e.event):
                        found.append(e)
                        if len(found) >= n:
                            break
        self._subscribers.add(sub)
        log.info("events.subscribed", client=client, resumed=resume is not None,
                 catchup=len(found), subscribers=len(self._subscribers))  # fmt: skip
        return sub, b"".join(e.catchup_frame() for e in reversed(found))

    def unsubscribe(self, sub: Subscription) -> None:
        sub.closed = True
        self._subscribers.discard(sub)
        log.info("events.unsubscribed", client=sub.client, delivered=sub.delivered,
                 dropped=sub.dropped, subscribers=len(self._subscribers))  # fmt: skip

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    def stats(self) -> dict[str, int]:
        """The narwhal's own metric: counters since start, subscribers, unwritten backlog."""
        return vars(self.counters) | {
            "subscribers": len(self._subscribers),
            "backlog": len(self._pending),
            "ring": len(self.ring),
        }

    # --- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        """Fill the ring from PostgreSQL, then start the persistence task."""
        await self.warm()
        self._flusher = asyncio.create_task(self._flush_loop(), name="chronicler-flush")

    async def warm(self) -> None:
        """The newest stored events become the ring's oldest (events recorded meanwhile stay
        after them), so the stream's catch-up and recent queries survive a restart."""
        if self.warmed.is_set():
            return
        started = self.ring.last_seq
        try:
            async with asyncio.timeout(WRITE_TIMEOUT_S), self.engine.connect() as conn:
                rows = (
                    await conn.execute(
                        select(_EVENTS)
                        .order_by(_EVENTS.c.timestamp.desc(), _EVENTS.c.event_id.desc())
                        .limit(self.ring.capacity)
                    )
                ).all()
        except Exception as exc:  # the ring then starts empty: queries go to PostgreSQL
            log.warning("events.warm_failed", error=repr(exc)[:300])
            rows = []
            self._uncover(datetime.now().astimezone())
        loaded: list[ObservabilityEvent] = []
        for row in reversed(rows):
            try:
                loaded.append(ObservabilityEvent.model_validate(row_to_dict(row)))
            except ValidationError:  # stored under an older registry: queries still show it
                continue
        if len(rows) >= self.ring.capacity:
            # Older stored events are not in the ring (ties of the oldest instant included).
            self._uncover(rows[-1].timestamp)
        recent = [e.event for e in self.ring.after(0, self.ring.capacity)]
        ring, self.ring = self.ring, EventRing(self.ring.capacity)
        ring_ids = {e.event_id for e in recent}
        for event in [*(e for e in loaded if e.event_id not in ring_ids), *recent]:
            _, evicted = self.ring.append(event, event.model_dump_json().encode())
            if evicted is not None:
                self._uncover(evicted.event.timestamp)
        del ring
        self.warmed.set()
        cut = self.covered_after.isoformat() if self.covered_after else None
        log.info("events.ring_warmed", loaded=len(loaded), recorded_before=started,
                 covered_after=cut)  # fmt: skip

    async def stop(self, timeout_s: float = 5.0) -> None:
        """End the streams, write what is pending (bounded in time), stop the task."""
        self.closing = True
        self._notify()
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._flusher
            self._flusher = None
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self.flush()
        if self._pending:
            left = len(self._pending)
            self._pending.clear()
            self.counters.persist_dropped += left
            log.warning("events.unwritten_at_stop", dropped=left)
        log.info("chronicler.stopped", **vars(self.counters))

    # --- persistence -------------------------------------------------------------------

    @property
    def backlog(self) -> int:
        return len(self._pending)

    def _backlog_overflow(self, n: int) -> None:
        self.counters.persist_dropped += n
        # One line per thousand dropped: an outage must not flood the log as well.
        if self.counters.persist_dropped % 1000 < n:
            log.warning("events.backlog_full", dropped_total=self.counters.persist_dropped,
                        backlog_max=self.settings.events_backlog_max)  # fmt: skip

    async def _flush_loop(self) -> None:
        backoff = self.settings.backoff(self.settings.events_flush_interval_s, RETRY_MAX_S)
        delays = backoff.delays()
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.events_flush_interval_s):
                    await self._wake.wait()
            self._wake.clear()
            if await self.flush():
                delays = backoff.delays()  # written: the next failure waits the least again
            else:
                await asyncio.sleep(next(delays))

    async def flush(self) -> bool:
        """Write everything pending now; False when a batch could not be written (it stays
        queued for the next try)."""
        async with self._write_lock:
            while self._pending:
                n = min(len(self._pending), self.settings.events_flush_batch)
                batch = [self._pending.popleft() for _ in range(n)]
                try:
                    await self._insert(batch)
                except Exception as exc:
                    self.counters.persist_failures += 1
                    unwritten = await self._insert_one_by_one(batch, exc)
                    if unwritten:
                        self._requeue(unwritten, exc)
                        return False
                    continue
                self.counters.persisted += len(batch)
        return True

    def _requeue(self, rows: list[dict[str, Any]], exc: Exception) -> None:
        """Back at the front, in order; past the bound the oldest go."""
        self._pending.extendleft(reversed(rows))
        over = len(self._pending) - self.settings.events_backlog_max
        for _ in range(max(0, over)):
            self._pending.popleft()
        if over > 0:
            self._backlog_overflow(over)
        log.warning("events.persist_failed", error=repr(exc)[:300], backlog=len(self._pending))

    async def _insert(self, rows: list[dict[str, Any]]) -> None:
        async with asyncio.timeout(WRITE_TIMEOUT_S), self.engine.begin() as conn:
            await conn.execute(_INSERT, rows)

    async def _insert_one_by_one(
        self, rows: list[dict[str, Any]], first: Exception
    ) -> list[dict[str, Any]]:
        """After a failed batch: while PostgreSQL answers, the batch is what it refuses, so
        write row by row and drop (and log) the rows it still refuses. Returns the rows left
        unwritten because PostgreSQL stopped answering (to retry later)."""
        if not await ping(self.engine, self.settings.health_timeout_s):
            return rows
        for i, row in enumerate(rows):
            try:
                await self._insert([row])
            except Exception as exc:
                if not await ping(self.engine, self.settings.health_timeout_s):
                    return rows[i:]
                self.counters.persist_dropped += 1
                log.error("events.row_refused", event_id=row["event_id"],
                          creature=row["creature"], error=repr(exc)[:300],
                          batch_error=repr(first)[:200])  # fmt: skip
            else:
                self.counters.persisted += 1
        return []

    # --- queries -----------------------------------------------------------------------

    async def query(
        self, flt: EventFilter, *, limit: int, offset: int, source: EventSource = "auto"
    ) -> dict[str, Any]:
        """Events matching `flt`, newest first (timestamp, then event_id), one page:
        `{"events", "source": "buffer"|"db", "limit", "offset", "next_offset"}`. `source`
        "buffer" reads the ring alone (what it holds, even when older events match too), "db"
        PostgreSQL alone, "auto" the ring when it holds the whole page."""
        page = None
        if source != "db":
            page = self._from_ring(flt, limit=limit, offset=offset, whole=source == "buffer")
        if page is not None:
            events, more = page
            answered = "buffer"
        else:
            events, more = await self._from_postgres(flt, limit=limit, offset=offset)
            answered = "db"
        return {
            "events": events,
            "source": answered,
            "limit": limit,
            "offset": offset,
            "next_offset": offset + len(events) if more else None,
        }

    def _from_ring(
        self, flt: EventFilter, *, limit: int, offset: int, whole: bool = False
    ) -> tuple[list[dict[str, Any]], bool] | None:
        """The page from the ring, or None when PostgreSQL may hold events that belong in it.
        `whole`: take what the ring holds as all there is (the caller asked for the ring)."""
        if not self.warmed.is_set() and not whole:
            return None
        cut = self.covered_after
        whole = whole or cut is None or (flt.since is not None and flt.since > cut)
        matches = [
            e.event
            for e in self.ring.newest()
            if flt.matches(e.event) and (cut is None or whole or e.event.timestamp > cut)
        ]
        # Arrival order is not timestamp order (a late file, a client's clock): sort.
        matches.sort(key=lambda e: (e.timestamp, e.event_id), reverse=True)
        # Not whole: events after `cut` are all here, older ones maybe not; the page is exact
        # only if it (and the one event that says whether more follow) lies after `cut`.
        if not whole and len(matches) < offset + limit + 1:
            return None
        page = matches[offset : offset + limit + 1]
        return [e.model_dump(mode="json") for e in page[:limit]], len(page) > limit

    async def _from_postgres(
        self, flt: EventFilter, *, limit: int, offset: int
    ) -> tuple[list[dict[str, Any]], bool]:
        # Events still queued belong in the answer: write them first (bounded; a failure
        # leaves them queued and the answer without them).
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(WRITE_TIMEOUT_S):
                await self.flush()
        stmt = select(_EVENTS)
        c = _EVENTS.c
        if flt.creatures is not None:
            stmt = stmt.where(c.creature.in_(sorted(flt.creatures)))
        if flt.services is not None:
            stmt = stmt.where(c.service.in_(sorted(flt.services)))
        if flt.event_types is not None:
            stmt = stmt.where(c.event_type.in_(sorted(flt.event_types)))
        if flt.session_id is not None:
            stmt = stmt.where(c.session_id == flt.session_id)
        if flt.since is not None:
            stmt = stmt.where(c.timestamp >= flt.since)
        if flt.until is not None:
            stmt = stmt.where(c.timestamp < flt.until)
        stmt = stmt.order_by(c.timestamp.desc(), c.event_id.desc()).limit(limit + 1).offset(offset)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(stmt)).all()
        events = [row_to_dict(r) for r in rows[:limit]]
        return events, len(rows) > limit

    # --- retention ---------------------------------------------------------------------

    async def purge(self, before: datetime) -> int:
        """Delete stored events older than `before`, in batches (short transactions: the
        writers of new events never wait long). Returns how many were deleted."""
        batch = self.settings.events_retention_batch
        old = (
            select(_EVENTS.c.event_id)
            .where(_EVENTS.c.timestamp < before)
            .order_by(_EVENTS.c.timestamp)
            .limit(batch)
            .scalar_subquery()
        )
        total = 0
        while True:
            async with self.engine.begin() as conn:
                result = await conn.execute(delete(_EVENTS).where(_EVENTS.c.event_id.in_(old)))
            n = result.rowcount
            total += n
            if n < batch:
                break
        log.info("events.retention", deleted=total, before=before.isoformat())
        return total


def _stored_id(event_id: str) -> str:
    """A client's event id as the ring keys it (the design's UUID form is stored without
    hyphens); anything else unchanged (the ring then does not hold it)."""
    try:
        return normalize_event_id(event_id)
    except ValueError:
        return event_id


async def sse_stream(
    chronicler: Chronicler,
    flt: EventFilter,
    *,
    last_event_id: str | None,
    client: str | None,
) -> AsyncIterator[bytes]:
    """The body of `GET /v1/events/stream`: a reconnect delay for EventSource, the catch-up
    (or the resumed events), then live chunks until the client goes or the engine stops. The
    subscription is made on the first read, so a client gone before then leaves nothing."""
    sub, first = chronicler.subscribe(flt, last_event_id=last_event_id, client=client)
    try:
        yield b"retry: %d\n: connected\n\n" % RECONNECT_MS + first
        while True:
            chunk = await sub.next_chunk()
            if chunk is None:
                return
            yield chunk
    finally:
        chronicler.unsubscribe(sub)
