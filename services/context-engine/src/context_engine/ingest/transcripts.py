"""Ingestion: a transcript JSONL file → sessions and segments in PostgreSQL, exactly once.

Each pass streams the file from the stored offset. Segments and the new offset are written in
one transaction per batch, so a crash at any point either keeps a batch whole or not at all,
and the next pass resumes exactly after the last committed line (upserts make a repeated batch
harmless anyway). A file that shrank or whose bytes before the offset changed (truncated, or
rewritten by a sweep) is read again from the start under a new generation; rows the new file
no longer has are then deleted, so PostgreSQL holds exactly the segments of the file.
"""

from __future__ import annotations

import asyncio
import os
from collections import defaultdict
from collections.abc import Awaitable, Callable, Generator
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from context_engine.ingest import dedup
from context_engine.ingest.tail import Tail, fingerprint, opened, still_holds
from context_engine.ingest.watcher import SeenFiles
from context_engine.observe.recorder import EventRecorder
from context_engine.store.models import IngestOffset
from her_os_shared.creatures import CreatureName
from her_os_shared.events import EventType
from her_os_shared.ids import InvalidIdError, validate_id
from her_os_shared.jsonl import SUFFIX, JsonlRecord, stream_path
from her_os_shared.logging import get_logger
from her_os_shared.transcript import TranscriptPayload

log = get_logger(__name__)


Status = Literal["ingested", "up_to_date", "reread", "missing", "invalid_name"]
SessionCallback = Callable[[str], Awaitable[None]]
# (session_id, changed segment ids or None for the whole session), after each commit.
ChangeCallback = Callable[[str, set[str] | None], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class IngestResult:
    session_id: str
    status: Status
    lines: int = 0
    segments: int = 0
    skipped: int = 0
    deleted_stale: int = 0
    offset: int = 0
    size: int = 0
    generation: int = 0


def _next_batch(
    records: Generator[JsonlRecord[TranscriptPayload], None, None],
    session_id: str,
    max_segments: int,
) -> tuple[tuple[list[tuple[int, TranscriptPayload]], list[str]], int | None]:
    """Pull payloads until `max_segments` are collected. Returns ((payloads, reasons of lines
    skipped here), end offset of the last line taken or None at end of file). Runs in a
    thread."""
    batch: list[tuple[int, TranscriptPayload]] = []
    skipped: list[str] = []
    count = 0
    for rec in records:
        payload = rec.value
        if payload.session_id != session_id:
            reason = f"session_id {payload.session_id!r} does not match the file name"
            log.warning("ingest.line_skipped", session_id=session_id, offset=rec.offset,
                        reason=reason)  # fmt: skip
            skipped.append(reason)
            continue
        batch.append((rec.offset, payload))
        count += len(payload.segments)
        if count >= max_segments:
            return (batch, skipped), rec.end
    return (batch, skipped), None


class Ingestor:
    """Ingests transcript files; one pass per file at a time (per-path lock)."""

    def __init__(
        self,
        engine: AsyncEngine,
        transcripts_dir: Path,
        *,
        batch_segments: int = 2000,
        on_session: SessionCallback | None = None,
        on_changed: ChangeCallback | None = None,
        recorder: EventRecorder | None = None,
    ) -> None:
        self.engine = engine
        self.transcripts_dir = Path(transcripts_dir)
        self.batch_segments = batch_segments
        self.on_session = on_session
        self.on_changed = on_changed
        self.recorder = recorder
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        # path → (size, mtime_ns or None) of the file as last fully read: the reconcile scan
        # skips files that have not changed since.
        self._seen = SeenFiles()

    def path_for(self, session_id: str) -> Path:
        """The file of a session; raises InvalidIdError on path tricks."""
        return stream_path(self.transcripts_dir, session_id)

    def path_lock(self, path: Path) -> asyncio.Lock:
        """The lock a pass over `path` holds (forgetting rewrites the file under it)."""
        return self._locks[str(Path(path))]

    async def load_offsets(self) -> None:
        """Remember the sizes already ingested, so the first reconcile skips them."""
        async with self.engine.connect() as conn:
            self._seen.seed(await conn.execute(select(IngestOffset.path, IngestOffset.size)))

    def is_current(self, path: Path, st: os.stat_result) -> bool:
        return self._seen.is_current(path, st)

    async def ingest_file(self, path: Path, *, from_start: bool = False) -> IngestResult:
        """One pass over the file. `from_start` reads it whole again under the same generation
        (upserts only, nothing deleted): the drift check's repair of rows lost from
        PostgreSQL behind an offset that says they were ingested."""
        path = Path(path)
        if path.suffix != SUFFIX:
            return IngestResult(session_id=path.name, status="invalid_name")
        try:
            session_id = validate_id(path.stem, "session_id")
        except InvalidIdError as exc:
            log.warning("ingest.file_skipped", path=str(path), reason=str(exc))
            return IngestResult(session_id=path.stem, status="invalid_name")
        async with self._locks[str(path)]:
            if self.recorder:
                await self.recorder.emit(
                    CreatureName.OUROBOROS, EventType.START, session_id=session_id
                )
            try:
                result = await self._ingest(path, session_id, from_start)
            except Exception as exc:
                if self.recorder:
                    await self.recorder.emit(
                        CreatureName.OUROBOROS,
                        EventType.ERROR,
                        session_id=session_id,
                        data={"error": repr(exc)[:500]},
                    )
                raise
        if self.recorder:
            await self.recorder.emit(
                CreatureName.OUROBOROS,
                EventType.COMPLETE,
                session_id=session_id,
                data={
                    "status": result.status,
                    "segments": result.segments,
                    "lines": result.lines,
                    "skipped": result.skipped,
                },
            )
        if result.segments and self.on_session is not None:
            await self.on_session(session_id)
        return result

    async def _ingest(self, path: Path, session_id: str, from_start: bool) -> IngestResult:
        async with opened(path) as f:  # one open file for the whole pass (tail.py)
            if f is None:
                return IngestResult(session_id=session_id, status="missing")
            return await self._ingest_open(path, session_id, f, from_start)

    async def _ingest_open(
        self, path: Path, session_id: str, f: IO[bytes], from_start: bool = False
    ) -> IngestResult:
        key = str(path)
        fd = f.fileno()
        st = os.fstat(fd)
        async with self.engine.connect() as conn:
            offsets = IngestOffset.__table__
            stored = (
                await conn.execute(select(offsets).where(offsets.c.path == key))
            ).one_or_none()
        start, generation, cleaned = 0, 1, 1
        reread = False
        if stored is not None:
            start, generation, cleaned = stored.offset, stored.generation, stored.cleaned_generation
            if not still_holds(fd, st.st_size, start, stored.fingerprint):
                reread = True
                log.info("ingest.file_replaced", path=key, old_offset=start, size=st.st_size)
                start, generation = 0, generation + 1
                async with self.engine.begin() as conn:
                    await self._save_offset(conn, key, session_id, 0, st, generation, cleaned, fd)
            elif from_start:
                start = 0

        if start == st.st_size and cleaned == generation:
            self._seen.remember(key, st)
            return IngestResult(session_id, "up_to_date", offset=start, size=st.st_size,
                                generation=generation)  # fmt: skip

        tail = Tail(path, TranscriptPayload, f, start)
        lines = segments = extra_skipped = deleted = 0
        async with aclosing(
            tail.batches(lambda records: _next_batch(records, session_id, self.batch_segments))
        ) as parts:
            async for part in parts:
                batch, skipped = part.items
                extra_skipped += len(skipped)
                changed: set[str] | None = set()
                async with self.engine.begin() as conn:
                    if batch:
                        rows = dedup.collect(batch, generation)
                        changed = await dedup.apply_batch(conn, rows)
                        lines += len(batch)
                        segments += sum(len(p.segments) for _, p in batch)
                    if part.last and cleaned < generation:
                        deleted = await dedup.delete_stale(conn, session_id, generation)
                        cleaned = generation
                        changed = None
                    await self._save_offset(
                        conn, key, session_id, part.offset, st, generation, cleaned, fd
                    )
                if self.on_changed is not None and changed != set():
                    await self.on_changed(session_id, changed)
                start = part.offset
        self._seen.remember(key, st)
        skipped_total = tail.skipped + extra_skipped
        log.info("ingest.file_done", path=key, session_id=session_id, lines=lines,
                 segments=segments, skipped=skipped_total, offset=start, reread=reread,
                 deleted_stale=deleted)  # fmt: skip
        return IngestResult(
            session_id=session_id,
            status="reread" if reread else "ingested",
            lines=lines,
            segments=segments,
            skipped=skipped_total,
            deleted_stale=deleted,
            offset=start,
            size=st.st_size,
            generation=generation,
        )

    async def _save_offset(
        self,
        conn: AsyncConnection,
        key: str,
        session_id: str,
        offset: int,
        st: os.stat_result,
        generation: int,
        cleaned: int,
        fd: int,
    ) -> None:
        fp = fingerprint(fd, offset)
        values = {
            "session_id": session_id,
            "offset": offset,
            "size": st.st_size,
            "inode": st.st_ino,
            "fingerprint": fp,
            "generation": generation,
            "cleaned_generation": cleaned,
        }
        stmt = pg_insert(IngestOffset).values(path=key, **values)
        stmt = stmt.on_conflict_do_update(index_elements=[IngestOffset.path], set_=values)
        await conn.execute(stmt)
