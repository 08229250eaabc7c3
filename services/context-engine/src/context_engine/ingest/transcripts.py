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
import hashlib
import os
from collections import defaultdict
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from context_engine.ingest import dedup
from context_engine.ingest.watcher import SeenFiles
from context_engine.observe.recorder import EventRecorder
from context_engine.store.models import IngestOffset
from her_os_shared.creatures import CreatureName
from her_os_shared.events import EventType
from her_os_shared.ids import InvalidIdError, validate_id
from her_os_shared.jsonl import SUFFIX, JsonlReader, JsonlRecord, stream_path
from her_os_shared.logging import get_logger
from her_os_shared.transcript import TranscriptPayload

log = get_logger(__name__)

FINGERPRINT_WINDOW = 64 * 1024

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


def fingerprint(fd: int, offset: int) -> str:
    """sha256 of the first and the last 64 KiB before `offset` of the open file `fd`: O(1)
    per append, and any rewrite of the file (a sweep, a truncation and regrowth) changes it
    in practice. Uses pread, so the file position of a reader on the same fd is untouched."""
    h = hashlib.sha256(str(offset).encode())
    h.update(os.pread(fd, min(offset, FINGERPRINT_WINDOW), 0))
    tail = max(FINGERPRINT_WINDOW, offset - FINGERPRINT_WINDOW)
    if tail < offset:
        h.update(os.pread(fd, offset - tail, tail))
    return h.hexdigest()


def _next_batch(
    records: Generator[JsonlRecord[TranscriptPayload], None, None],
    session_id: str,
    max_segments: int,
) -> tuple[list[tuple[int, TranscriptPayload]], int | None, list[str]]:
    """Pull payloads until `max_segments` are collected. Returns (payloads, end offset of the
    last line taken or None at end of file, reasons of lines skipped here). Runs in a thread."""
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
            return batch, rec.end, skipped
    return batch, None, skipped


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
        try:
            # One open file for the whole pass: stat, fingerprint and lines all come from the
            # version read, even if the writer renames a newer one into place meanwhile.
            f = await asyncio.to_thread(path.open, "rb")
        except FileNotFoundError:
            return IngestResult(session_id=session_id, status="missing")
        try:
            return await self._ingest_open(path, session_id, f, from_start)
        finally:
            f.close()

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
            same = st.st_size >= start and fingerprint(fd, start) == stored.fingerprint
            if not same:
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

        reader = JsonlReader(path, TranscriptPayload, start=start, file=f)
        records = iter(reader)
        lines = segments = extra_skipped = deleted = 0
        try:
            while True:
                batch, end, skipped = await asyncio.to_thread(
                    _next_batch, records, session_id, self.batch_segments
                )
                extra_skipped += len(skipped)
                offset = reader.offset if end is None else end
                changed: set[str] | None = set()
                async with self.engine.begin() as conn:
                    if batch:
                        rows = dedup.collect(batch, generation)
                        changed = await dedup.apply_batch(conn, rows)
                        lines += len(batch)
                        segments += sum(len(p.segments) for _, p in batch)
                    if end is None and cleaned < generation:
                        deleted = await dedup.delete_stale(conn, session_id, generation)
                        cleaned = generation
                        changed = None
                    await self._save_offset(
                        conn, key, session_id, offset, st, generation, cleaned, fd
                    )
                if self.on_changed is not None and changed != set():
                    await self.on_changed(session_id, changed)
                start = offset
                if end is None:
                    break
        finally:
            records.close()
        self._seen.remember(key, st)
        skipped_total = len(reader.skipped) + extra_skipped
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
