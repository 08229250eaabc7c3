"""The audio pipeline's observability events: `events_dir/*.jsonl` → PostgreSQL → the chronicler.

The audio pipeline appends its events to hourly JSONL files with the shared atomic writer (a
new inode per append, like transcripts), watched by the same watcher as the transcripts
(watcher.py). One pass over a file reads from the stored offset in batches; each batch's
events and the new offset are written in one transaction (`ON CONFLICT (event_id) DO
NOTHING ... RETURNING`), and only the events that transaction inserted are then published to
the ring and the live stream. So a restart (or a crash between the commit and the publish, or
a file rewritten and read again from the start) neither loses nor repeats an event.
Events older than the retention window are not ingested (the retention job would delete them).
"""

from __future__ import annotations

import asyncio
import os
from collections import defaultdict
from collections.abc import Generator
from contextlib import aclosing
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Literal

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from context_engine.ingest.tail import Tail, fingerprint, opened, still_holds
from context_engine.ingest.watcher import SeenFiles
from context_engine.observe.chronicler import (
    Chronicler,
    InvalidEventError,
    check_storable,
    event_row,
)
from context_engine.store.models import EventOffset, ObservabilityEventRow
from her_os_shared.events import ObservabilityEvent
from her_os_shared.jsonl import SUFFIX, JsonlRecord
from her_os_shared.logging import get_logger

log = get_logger(__name__)

Status = Literal["read", "up_to_date", "reread", "missing", "invalid_name"]
_INSERT = (
    pg_insert(ObservabilityEventRow)
    .on_conflict_do_nothing(index_elements=["event_id"])
    .returning(ObservabilityEventRow.event_id)
)


@dataclass(frozen=True, slots=True)
class EventFileResult:
    path: str
    status: Status
    lines: int = 0
    new: int = 0  # events stored and published by this pass
    skipped: int = 0  # bad lines, and events past the retention window
    offset: int = 0


def _next_batch(
    records: Generator[JsonlRecord[ObservabilityEvent], None, None],
    max_events: int,
    oldest: datetime,
) -> tuple[tuple[list[ObservabilityEvent], int], int | None]:
    """((events, lines skipped here), end offset of the last line taken or None at end of
    file). Runs in a thread."""
    batch: list[ObservabilityEvent] = []
    skipped = 0
    for rec in records:
        event = rec.value
        try:
            check_storable(event)
        except InvalidEventError as exc:
            log.warning("events.line_skipped", offset=rec.offset, reason=str(exc))
            skipped += 1
            continue
        if event.timestamp < oldest:
            skipped += 1
            continue
        batch.append(event)
        if len(batch) >= max_events:
            return (batch, skipped), rec.end
    return (batch, skipped), None


class EventFileReader:
    """Reads event files into PostgreSQL and the chronicler; one pass per file at a time."""

    def __init__(
        self,
        engine: AsyncEngine,
        chronicler: Chronicler,
        directory: Path,
        *,
        batch_events: int = 1000,
        retention_days: float = 7.0,
    ) -> None:
        self.engine = engine  # the events pool
        self.chronicler = chronicler
        self.directory = Path(directory)
        self.batch_events = batch_events
        self.retention = timedelta(days=retention_days)
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._seen = SeenFiles()

    def path_lock(self, path: Path) -> asyncio.Lock:
        """The lock a pass over `path` holds (forgetting rewrites the file under it)."""
        return self._locks[str(Path(path))]

    async def load_offsets(self) -> None:
        """Remember the sizes already read, so the first reconcile skips them."""
        async with self.engine.connect() as conn:
            self._seen.seed(await conn.execute(select(EventOffset.path, EventOffset.size)))

    def is_current(self, path: Path, st: os.stat_result) -> bool:
        return self._seen.is_current(path, st)

    async def read_file(self, path: Path) -> EventFileResult:
        path = Path(path)
        if path.suffix != SUFFIX or path.name.startswith("."):
            return EventFileResult(str(path), "invalid_name")
        async with self._locks[str(path)], opened(path) as f:
            if f is None:
                return EventFileResult(str(path), "missing")
            return await self._read_open(path, f)

    async def _read_open(self, path: Path, f: IO[bytes]) -> EventFileResult:
        key = str(path)
        fd = f.fileno()
        st = os.fstat(fd)
        async with self.engine.connect() as conn:
            offsets = EventOffset.__table__
            stored = (
                await conn.execute(select(offsets).where(offsets.c.path == key))
            ).one_or_none()
        start, reread = 0, False
        if stored is not None:
            start = stored.offset
            if not still_holds(fd, st.st_size, start, stored.fingerprint):
                # Rewritten or truncated: read it all again; stored events are not repeated.
                log.info("events.file_replaced", path=key, old_offset=start, size=st.st_size)
                start, reread = 0, True
        if start == st.st_size:
            self._seen.remember(key, st)
            return EventFileResult(key, "up_to_date", offset=start)

        oldest = datetime.now(UTC) - self.retention
        tail = Tail(path, ObservabilityEvent, f, start)
        lines = new = skipped = 0
        async with aclosing(
            tail.batches(lambda records: _next_batch(records, self.batch_events, oldest))
        ) as parts:
            async for part in parts:
                batch, skipped_here = part.items
                skipped += skipped_here
                async with self.engine.begin() as conn:
                    inserted: set[str] = set()
                    if batch:
                        result = await conn.execute(_INSERT, [event_row(e) for e in batch])
                        inserted = set(result.scalars().all())
                    await self._save_offset(conn, key, part.offset, st.st_size, fd)
                fresh = [e for e in batch if e.event_id in inserted]
                # Stored first, published after the commit: a crash in between loses the
                # live notification of these events, never the events.
                self.chronicler.publish(fresh)
                lines += len(batch) + skipped_here
                new += len(fresh)
                start = part.offset
        self._seen.remember(key, st)
        skipped += tail.skipped
        log.info("events.file_read", path=key, new=new, skipped=skipped, offset=start,
                 reread=reread)  # fmt: skip
        return EventFileResult(
            key, "reread" if reread else "read", lines=lines, new=new, skipped=skipped,
            offset=start,
        )  # fmt: skip

    async def _save_offset(
        self, conn: AsyncConnection, key: str, offset: int, size: int, fd: int
    ) -> None:
        values = {"offset": offset, "size": size, "fingerprint": fingerprint(fd, offset)}
        stmt = pg_insert(EventOffset).values(path=key, **values)
        stmt = stmt.on_conflict_do_update(index_elements=[EventOffset.path], set_=values)
        await conn.execute(stmt)
