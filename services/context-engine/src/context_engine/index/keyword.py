"""The keyword index: a Tantivy (BM25, top-k with block-max WAND) copy of the active segments.

PostgreSQL stays the authority: it tokenises (the GENERATED `tsv` column: its lexemes and
positions are indexed as they are, pre-tokenised) and parses queries (`websearch_to_tsquery`,
translated by `tsquery.py`), so both backends agree on stemming, stopwords and phrase distance.
Tantivy only ranks, without visiting every match: that is what makes common words fast at 1M
segments (ADR 0006). Results are re-checked against PostgreSQL before they are returned.

Consistency: after every ingest transaction the ingestor reports the keys (or whole sessions)
it changed, and `apply()` re-reads their current state from PostgreSQL (idempotent, so order
does not matter). A marker file says the index was closed cleanly; without it (a crash between
a PostgreSQL commit and the index commit) the index is rebuilt from PostgreSQL in the
background, and the keyword leg uses PostgreSQL full-text search until it is ready.
"""

from __future__ import annotations

import asyncio
import re
import shutil
from collections import defaultdict
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import tantivy
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from her_os_shared.logging import get_logger
from her_os_shared.retry import Backoff, retry_until_done

log = get_logger(__name__)

# Between tries to rebuild the index while PostgreSQL does not answer.
REBUILD_RETRY = Backoff(5.0, 60.0)
T = TypeVar("T")

SCHEMA_VERSION = "3"  # 2: documents carry the speaker and the turn before; 3: and `lex_next`
_CLEAN = "CLEAN"
_VERSION = "SCHEMA_VERSION"
_LEXEME = re.compile(r"'((?:[^']|'')*)'(?::([0-9A-D,]+))?")

# What a segment is found by (`lex`): its own words and speaker, after the turn before it in
# the same session (its words and speaker). A question's answer often needs that context
# ("Where did you go?" / "Lisbon."); measured on LoCoMo (docs/adr/0010-retrieval-defaults.md).
# And (`lex_next`) its own words before the turn after it: the reply often holds what a turn
# was about (the keyword leg's second ranking, `bm25_next`; ADR 0014). PostgreSQL's tsvector
# `||` shifts the right-hand positions, so phrases stay within one turn.
# _ROWS: a session's segments (`ids` NULL), or the given ones and the segments right before
# and after them (whose context they are).
_ROWS = text(
    """
    WITH c AS (
      SELECT segment_id,
             lag(to_tsvector('english', speaker) || tsv) OVER w AS prev,
             lead(to_tsvector('english', speaker) || tsv) OVER w AS next,
             lag(segment_id) OVER w AS prev_id,
             lead(segment_id) OVER w AS next_id
      FROM segments WHERE session_id = :sid AND replaced_by IS NULL
      WINDOW w AS (ORDER BY start_s, segment_id)
    )
    SELECT s.session_id, s.segment_id, s.spoken_at, s.replaced_by IS NULL AS active,
      (coalesce(c.prev, ''::tsvector) || to_tsvector('english', s.speaker) || s.tsv)::text AS tsv,
      (to_tsvector('english', s.speaker) || s.tsv || coalesce(c.next, ''::tsvector))::text
        AS tsv_next
    FROM segments s LEFT JOIN c USING (segment_id)
    WHERE s.session_id = :sid
      AND (CAST(:ids AS text[]) IS NULL OR s.segment_id = ANY(CAST(:ids AS text[]))
           OR c.prev_id = ANY(CAST(:ids AS text[])) OR c.next_id = ANY(CAST(:ids AS text[])))
    """
)
_ALL_ACTIVE = text(
    """
    SELECT session_id, segment_id, spoken_at, true AS active,
      (coalesce(lag(to_tsvector('english', speaker) || tsv) OVER w, ''::tsvector)
       || to_tsvector('english', speaker) || tsv)::text AS tsv,
      (to_tsvector('english', speaker) || tsv
       || coalesce(lead(to_tsvector('english', speaker) || tsv) OVER w, ''::tsvector))::text
        AS tsv_next
    FROM segments WHERE replaced_by IS NULL
    WINDOW w AS (PARTITION BY session_id ORDER BY start_s, segment_id)
    """
)
FIELDS = ("lex", "lex_next")  # what a segment is found by: with the turn before, after


def key_of(session_id: str, segment_id: str) -> str:
    return f"{session_id}/{segment_id}"  # both ids are [A-Za-z0-9_-]: "/" cannot clash


def tokens_of(tsv: str) -> list[tantivy.Token]:
    """PostgreSQL's tsvector text (`'lexeme':1,4 'other':2`) → tokens at those positions."""
    tokens = []
    for m in _LEXEME.finditer(tsv):
        lexeme = m.group(1).replace("''", "'")
        for pos in (m.group(2) or "1").split(","):
            position = int(pos.rstrip("ABCD")) - 1
            tokens.append(
                tantivy.Token(text=lexeme, position=position, char_offset_from=0, char_offset_to=0)
            )
    tokens.sort(key=lambda t: t.position)
    return tokens


@dataclass(slots=True)
class Changes:
    """What to re-read: whole sessions, or some segments of a session."""

    sessions: set[str] = field(default_factory=set)
    segments: defaultdict[str, set[str]] = field(default_factory=lambda: defaultdict(set))

    def add(self, session_id: str, segment_ids: Iterable[str] | None) -> None:
        if segment_ids is None:
            self.sessions.add(session_id)
            self.segments.pop(session_id, None)
        elif session_id not in self.sessions:
            self.segments[session_id].update(segment_ids)

    def merge(self, other: Changes) -> None:
        for sid in other.sessions:
            self.add(sid, None)
        for sid, ids in other.segments.items():
            self.add(sid, ids)

    def __bool__(self) -> bool:
        return bool(self.sessions or self.segments)


class SegmentSearchIndex:
    def __init__(
        self,
        directory: Path,
        engine: AsyncEngine,
        *,
        heap_bytes: int = 64_000_000,
        retry: Backoff = REBUILD_RETRY,
    ) -> None:
        self.directory = Path(directory)
        self.retry = retry
        self.engine = engine
        self.heap_bytes = heap_bytes
        sb = tantivy.SchemaBuilder()
        sb.add_text_field("key", stored=True, tokenizer_name="raw")
        sb.add_text_field("session", stored=False, tokenizer_name="raw")
        sb.add_text_field("lex", stored=False, tokenizer_name="raw")
        sb.add_text_field("lex_next", stored=False, tokenizer_name="raw")
        sb.add_date_field("spoken_at", stored=False, indexed=True, fast=True)
        self.schema = sb.build()
        self._index: tantivy.Index | None = None
        self._writer: Any = None
        self._lock = asyncio.Lock()
        self._pending = Changes()  # changes seen while rebuilding
        self._rebuilding = False
        self._ready = asyncio.Event()
        self._rebuild_task: asyncio.Task[None] | None = None
        self._closing = False
        # Every use of the writer runs on this one thread, in order: a cancelled caller's
        # operation still finishes before the next one starts (the writer is not shareable).
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="search-index")

    @property
    def ready(self) -> bool:
        """True when searches can use the index (False while it is (re)built)."""
        return self._ready.is_set()

    @ready.setter
    def ready(self, value: bool) -> None:
        if value:
            self._ready.set()
        else:
            self._ready.clear()

    async def wait_ready(self) -> None:
        await self._ready.wait()

    # --- lifecycle ---

    async def open(self) -> None:
        """Open the index; rebuild it in the background unless it was closed cleanly."""
        try:
            clean = await self._run(self._open_files)
        except Exception as exc:  # e.g. another engine holds the writer lock: degrade, not die
            log.error("search_index.unavailable", path=str(self.directory), error=repr(exc)[:300])
            self._writer = None
            return
        if clean:
            self.ready = True
            log.info("search_index.opened", path=str(self.directory))
        else:
            self._start_rebuild()

    def _open_files(self) -> bool:
        version = self.directory / _VERSION
        usable = version.is_file() and version.read_text().strip() == SCHEMA_VERSION
        clean = usable and (self.directory / _CLEAN).is_file()
        if not usable and self.directory.exists():
            shutil.rmtree(self.directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._index = tantivy.Index(self.schema, path=str(self.directory))
        self._writer = self._index.writer(heap_size=self.heap_bytes, num_threads=1)
        version.write_text(SCHEMA_VERSION)
        # Dirty from now on, until close() commits and marks it clean again.
        (self.directory / _CLEAN).unlink(missing_ok=True)
        return clean

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    async def close(self) -> None:
        self._closing = True
        if self._rebuild_task is not None:
            self._rebuild_task.cancel()
            await asyncio.gather(self._rebuild_task, return_exceptions=True)
        try:
            async with self._lock:
                if self._writer is None:
                    return
                clean = self.ready and not self._pending

                def finish() -> None:
                    self._writer.commit()
                    self._writer.wait_merging_threads()
                    if clean:
                        (self.directory / _CLEAN).write_text("closed cleanly\n")

                await self._run(finish)
                self._writer = None
                self.ready = False
        finally:
            self._pool.shutdown(wait=False)

    # --- writing ---

    async def apply(self, changes: Changes) -> None:
        """Bring the given keys/sessions in line with PostgreSQL."""
        if not changes or self._writer is None:
            return
        if self._rebuilding:
            self._pending.merge(changes)
            return
        try:
            async with self._lock:
                await self._apply_locked(changes)
        except Exception as exc:  # the index is derived: rebuild it rather than fail ingestion
            log.error("search_index.apply_failed", error=repr(exc)[:500])
            self.ready = False
            self._start_rebuild()

    def _start_rebuild(self) -> None:
        if self._rebuild_task is None or self._rebuild_task.done():
            self._rebuild_task = asyncio.create_task(
                self._rebuild_until_done(), name="search-index-rebuild"
            )

    async def _rebuild_until_done(self) -> None:
        async def attempt() -> None:
            if not self._closing:
                await self.rebuild()

        # PostgreSQL away: searches keep being served from PostgreSQL meanwhile
        await retry_until_done(
            attempt, backoff=self.retry, log=log, event="search_index.rebuild_failed"
        )

    async def _apply_locked(self, changes: Changes) -> None:
        rows: list[Any] = []
        async with self.engine.connect() as conn:
            for sid in changes.sessions:
                rows += (await conn.execute(_ROWS, {"sid": sid, "ids": None})).all()
            for sid, ids in changes.segments.items():
                rows += (await conn.execute(_ROWS, {"sid": sid, "ids": sorted(ids)})).all()

        def write() -> None:
            w = self._writer
            for sid in changes.sessions:
                w.delete_documents_by_term("session", sid)
            for sid, ids in changes.segments.items():
                for gid in ids:
                    w.delete_documents_by_term("key", key_of(sid, gid))
            for r in rows:  # followers of changed segments: re-indexed with their new context
                w.delete_documents_by_term("key", key_of(r.session_id, r.segment_id))
            for r in rows:
                if r.active:
                    w.add_document(self._document(r))
            w.commit()
            assert self._index is not None
            self._index.reload()

        await self._run(write)

    def _document(self, r: Any) -> tantivy.Document:
        key = key_of(r.session_id, r.segment_id)
        doc = tantivy.Document(key=key, session=r.session_id, spoken_at=r.spoken_at)
        for name, tsv in (("lex", r.tsv), ("lex_next", r.tsv_next)):
            doc.add_pre_tokenized_text(
                name, tantivy.PreTokenizedString(text="", tokens=tokens_of(tsv))
            )
        return doc

    async def rebuild(self) -> None:
        """Re-create the index from PostgreSQL (changes meanwhile are queued, then applied)."""
        self._rebuilding = True
        self.ready = False
        count = 0
        try:
            async with self._lock:
                try:
                    await self._run(self._writer.delete_all_documents)
                    async with self.engine.connect() as conn:
                        stream = await conn.stream(_ALL_ACTIVE.execution_options(yield_per=5000))
                        async for part in stream.partitions(5000):
                            docs = [self._document(r) for r in part]
                            await self._run(self._add_all, docs)
                            count += len(docs)
                            if count % 100_000 < 5000:
                                log.info("search_index.rebuild_progress", segments=count)
                    await self._run(self._commit_reload)
                except BaseException:
                    # Drop what this attempt added, or the next attempt would add it twice.
                    await asyncio.shield(asyncio.to_thread(self._writer.rollback))
                    raise
            self._rebuilding = False
            pending, self._pending = self._pending, Changes()
            async with self._lock:
                await self._apply_locked(pending)
            self.ready = True
            log.info("search_index.rebuilt", segments=count)
        finally:
            self._rebuilding = False

    def _add_all(self, docs: list[tantivy.Document]) -> None:
        for doc in docs:
            self._writer.add_document(doc)

    def _commit_reload(self) -> None:
        self._writer.commit()
        assert self._index is not None
        self._index.reload()

    # --- reading ---

    def num_docs(self) -> int:
        assert self._index is not None
        return int(self._index.searcher().num_docs)

    def search(
        self, query: tantivy.Query, *, as_of: datetime, since: datetime | None, k: int, offset: int
    ) -> list[tuple[str, float]]:
        assert self._index is not None
        window = tantivy.Query.range_query(
            self.schema, "spoken_at", tantivy.FieldType.Date, since, as_of
        )
        full = tantivy.Query.boolean_query(
            [
                (tantivy.Occur.Must, query),
                (tantivy.Occur.Must, tantivy.Query.const_score_query(window, 0.0)),
            ]
        )
        searcher = self._index.searcher()
        hits = searcher.search(full, k, count=False, offset=offset).hits
        return [(searcher.doc(addr)["key"][0], float(score)) for score, addr in hits]
