"""Segment dedup: how transcript payloads become rows of `segments`.

The rules (the design's):
- Fast path: the latest write of a segment_id wins.
- Sweep: a sweep segment replaces every non-pinned fast-path segment of its session that
  overlaps it in time. Replaced rows stay (with `replaced_by`) for history; retrieval only
  sees rows with `replaced_by IS NULL`. The result does not depend on the order in which
  sweep and fast-path lines arrive: replacement is recomputed from what is stored.
- Pinned segments (user-corrected) are never replaced: neither by a sweep nor by a later
  unpinned write of the same segment_id.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, case, func, not_, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from context_engine.store.models import Segment, Session
from her_os_shared.transcript import TranscriptPayload

_SEGMENT_COLUMNS = (
    "speaker", "text", "start_s", "end_s", "spoken_at", "language", "stt_engine",
    "emotion_label", "emotion_score", "emotion_engine", "pinned", "is_sweep", "source_offset",
    "overlap",
)  # fmt: skip


@dataclass(slots=True)
class SegmentRows:
    """The rows one batch of payloads of one session writes."""

    session_id: str
    device_id: str
    started_at: datetime
    last_spoken_at: datetime
    rows: dict[str, dict[str, Any]]

    @property
    def has_sweep(self) -> bool:
        return any(r["is_sweep"] for r in self.rows.values())


def collect(payloads: Iterable[tuple[int, TranscriptPayload]], generation: int) -> SegmentRows:
    """Fold payloads (with the byte offset of their line, in file order) into one row per
    segment_id: the latest write wins, except that an unpinned write never beats a pinned one."""
    rows: dict[str, dict[str, Any]] = {}
    session_id = device_id = ""
    started: datetime | None = None
    last: datetime | None = None
    for offset, p in payloads:
        session_id, device_id = p.session_id, device_id or p.device_id
        started = p.session_started_at if started is None else min(started, p.session_started_at)
        for seg in p.segments:
            old = rows.get(seg.segment_id)
            if old is not None and old["pinned"] and not seg.pinned:
                continue
            spoken_at = p.session_started_at + timedelta(seconds=seg.start)
            ended = p.session_started_at + timedelta(seconds=seg.end)
            last = ended if last is None else max(last, ended)
            rows[seg.segment_id] = {
                "session_id": p.session_id,
                "segment_id": seg.segment_id,
                "speaker": seg.speaker,
                "text": seg.text,
                "start_s": seg.start,
                "end_s": seg.end,
                "spoken_at": spoken_at,
                "language": seg.language,
                "stt_engine": seg.stt_engine,
                "emotion_label": seg.emotion.label if seg.emotion else None,
                "emotion_score": seg.emotion.score if seg.emotion else None,
                "emotion_engine": seg.emotion.engine if seg.emotion else None,
                "pinned": seg.pinned,
                "is_sweep": p.is_sweep,
                "source_offset": offset,
                # NULL when nobody talked over it (the JSONL line leaves the field out then)
                "overlap": [o.model_dump() for o in seg.overlap] or None,
                "generation": generation,
            }
    assert started is not None, "collect() needs at least one payload"
    return SegmentRows(session_id, device_id, started, last or started, rows)


async def upsert_session(conn: AsyncConnection, batch: SegmentRows) -> None:
    """Create the session or widen it; new speech re-opens an ended session (it is finalised
    again once it falls silent)."""
    stmt = pg_insert(Session).values(
        session_id=batch.session_id,
        device_id=batch.device_id,
        started_at=batch.started_at,
        last_spoken_at=batch.last_spoken_at,
    )
    stmt = stmt.on_conflict_do_update(
        index_elements=[Session.session_id],
        set_={
            "started_at": func.least(Session.started_at, stmt.excluded.started_at),
            "last_spoken_at": func.greatest(Session.last_spoken_at, stmt.excluded.last_spoken_at),
            "ended_at": None,
            "updated_at": func.now(),
        },
    )
    await conn.execute(stmt)


async def upsert_segments(conn: AsyncConnection, batch: SegmentRows) -> None:
    if not batch.rows:
        return
    stmt = pg_insert(Segment)
    ex = stmt.excluded
    keep_pinned = and_(Segment.pinned, not_(ex.pinned))
    set_: dict[str, Any] = {
        c: case((keep_pinned, getattr(Segment, c)), else_=getattr(ex, c)) for c in _SEGMENT_COLUMNS
    }
    # A row present in the file belongs to the current read generation even when a pinned
    # version kept its content, so it is not deleted as stale after a full re-read.
    set_["generation"] = ex.generation
    set_["replaced_by"] = case((keep_pinned, Segment.replaced_by), else_=None)
    set_["ingested_at"] = func.now()
    stmt = stmt.on_conflict_do_update(
        index_elements=[Segment.session_id, Segment.segment_id], set_=set_
    )
    await conn.execute(stmt, list(batch.rows.values()))


# For each non-pinned fast-path row (all of the session, or those in :ids): the first sweep
# segment overlapping it (zero-length segments count as 1 µs long), or NULL.
_RESOLVE = text(
    """
    UPDATE segments f SET replaced_by = r.sweep_id
    FROM (
        SELECT f2.segment_id, (
            SELECT s.segment_id FROM segments s
            WHERE s.session_id = :session_id AND s.is_sweep
              AND s.start_s < greatest(f2.end_s, f2.start_s + 0.000001)
              AND greatest(s.end_s, s.start_s + 0.000001) > f2.start_s
            ORDER BY s.start_s, s.segment_id LIMIT 1
        ) AS sweep_id
        FROM segments f2
        WHERE f2.session_id = :session_id AND NOT f2.is_sweep AND NOT f2.pinned
          AND (CAST(:ids AS text[]) IS NULL OR f2.segment_id = ANY(CAST(:ids AS text[])))
    ) r
    WHERE f.session_id = :session_id AND f.segment_id = r.segment_id
      AND f.replaced_by IS DISTINCT FROM r.sweep_id
    """
)
_HAS_SWEEP = text("SELECT EXISTS (SELECT 1 FROM segments WHERE session_id = :sid AND is_sweep)")


async def resolve_replacements(
    conn: AsyncConnection, session_id: str, segment_ids: Sequence[str] | None = None
) -> int:
    """Recompute `replaced_by` of the session's non-pinned fast-path segments (all of them, or
    the given ones) from the stored sweep segments. Returns the number of rows changed."""
    if segment_ids is not None and not segment_ids:
        return 0
    ids = None if segment_ids is None else list(segment_ids)
    result = await conn.execute(_RESOLVE, {"session_id": session_id, "ids": ids})
    return result.rowcount


async def apply_batch(conn: AsyncConnection, batch: SegmentRows) -> set[str] | None:
    """Write one batch of one session under the dedup rules (inside the caller's transaction).
    Returns the segment ids whose stored state may have changed, or None for "any segment of
    the session" (a sweep can replace any of them)."""
    await upsert_session(conn, batch)
    await upsert_segments(conn, batch)
    if batch.has_sweep:
        # New or moved sweep segments can change what any fast-path segment overlaps.
        await resolve_replacements(conn, batch.session_id)
        return None
    if (await conn.execute(_HAS_SWEEP, {"sid": batch.session_id})).scalar():
        # Late fast-path lines of an already swept session are replaced at once.
        fast = [sid for sid, r in batch.rows.items() if not r["is_sweep"]]
        await resolve_replacements(conn, batch.session_id, fast)
    return set(batch.rows)


async def delete_stale(conn: AsyncConnection, session_id: str, generation: int) -> int:
    """After a full re-read: delete rows no longer in the file, then recompute replacements
    (a deleted sweep segment must not keep hiding the fast-path rows it replaced)."""
    result = await conn.execute(
        text("DELETE FROM segments WHERE session_id = :sid AND generation < :gen"),
        {"sid": session_id, "gen": generation},
    )
    await resolve_replacements(conn, session_id)
    return result.rowcount
