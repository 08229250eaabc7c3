"""Sessions: when one ends (finalisation), and how they are read back."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from context_engine.store.models import Segment, Session, SessionStage

FINALISE_STAGE = "finalise"
FINALISE_VERSION = 1

_ACTIVE_STATS = text(
    """
    SELECT count(*) AS n,
           max(spoken_at + make_interval(secs => end_s - start_s)) AS last_end,
           max(ingested_at) AS last_ingested
    FROM segments WHERE session_id = :sid AND replaced_by IS NULL
    """
)


@dataclass(frozen=True, slots=True)
class FinaliseOutcome:
    status: Literal["finalised", "still_active", "missing"]
    fingerprint: str = ""
    segments_count: int = 0
    ended_at: datetime | None = None


async def finalise_input(conn: AsyncConnection, session_id: str) -> tuple[str, Any]:
    """The stage's input fingerprint (changes with any new or replaced segment) and stats."""
    stats = (await conn.execute(_ACTIVE_STATS, {"sid": session_id})).one()
    raw = f"{stats.n}|{stats.last_end}|{stats.last_ingested}"
    return hashlib.sha256(raw.encode()).hexdigest()[:32], stats


async def finalise(
    conn: AsyncConnection, session_id: str, *, now: datetime, gap: timedelta
) -> FinaliseOutcome:
    """End a session that has been silent for `gap`: ended_at = the end of its last active
    segment, segments_count = its active segments. A session that spoke again since the job
    was queued is left open (the idle scan queues it again later)."""
    sessions = Session.__table__
    session = (
        await conn.execute(
            select(sessions).where(sessions.c.session_id == session_id).with_for_update()
        )
    ).one_or_none()
    if session is None:
        return FinaliseOutcome("missing")
    fp, stats = await finalise_input(conn, session_id)
    last = stats.last_end or session.last_spoken_at or session.started_at
    if last > now - gap:
        return FinaliseOutcome("still_active", fp)
    await conn.execute(
        sessions.update()
        .where(sessions.c.session_id == session_id)
        .values(ended_at=last, last_spoken_at=last, segments_count=stats.n, updated_at=func.now())
    )
    return FinaliseOutcome("finalised", fp, stats.n, last)


async def idle_sessions(
    conn: AsyncConnection,
    *,
    now: datetime,
    gap: timedelta,
    among: list[str] | None = None,
    limit: int = 1000,
) -> list[str]:
    """Open sessions (of `among`, or all) whose last speech is older than the gap."""
    q = select(Session.session_id).where(
        Session.ended_at.is_(None), Session.last_spoken_at < now - gap
    )
    if among is not None:
        q = q.where(Session.session_id.in_(among))
    rows = await conn.execute(q.order_by(Session.last_spoken_at).limit(limit))
    return list(rows.scalars())


# --- reads (the API) ---

_active_count = (
    select(func.count())
    .where(Segment.session_id == Session.session_id, Segment.replaced_by.is_(None))
    .correlate(Session)
    .scalar_subquery()
)


def _session_dict(s: Any, active: int) -> dict[str, Any]:
    return {
        "session_id": s.session_id,
        "device_id": s.device_id,
        "started_at": s.started_at,
        "last_spoken_at": s.last_spoken_at,
        "ended_at": s.ended_at,
        "status": "ended" if s.ended_at is not None else "open",
        "segments_count": active,
    }


async def list_sessions(
    conn: AsyncConnection,
    *,
    limit: int,
    offset: int,
    since: datetime | None = None,
    until: datetime | None = None,
) -> tuple[list[dict[str, Any]], int]:
    where = []
    if since is not None:
        where.append(Session.started_at >= since)
    if until is not None:
        where.append(Session.started_at < until)
    total = (await conn.execute(select(func.count()).select_from(Session).where(*where))).scalar()
    rows = await conn.execute(
        select(Session.__table__, _active_count.label("active"))
        .where(*where)
        .order_by(Session.started_at.desc(), Session.session_id)
        .limit(limit)
        .offset(offset)
    )
    return [_session_dict(r, r.active) for r in rows], int(total or 0)


async def get_session(
    conn: AsyncConnection,
    session_id: str,
    *,
    include_replaced: bool = False,
    offset: int = 0,
    limit: int | None = None,
) -> dict[str, Any] | None:
    """The session with its segments in order (from `offset`, at most `limit` of them: a page
    of a long session is read without reading the rest) and its stages."""
    row = (
        await conn.execute(
            select(Session.__table__, _active_count.label("active")).where(
                Session.session_id == session_id
            )
        )
    ).one_or_none()
    if row is None:
        return None
    q = select(Segment.__table__).where(Segment.session_id == session_id)
    if not include_replaced:
        q = q.where(Segment.replaced_by.is_(None))
    q = q.order_by(Segment.start_s, Segment.segment_id).offset(offset)
    segments = await conn.execute(q if limit is None else q.limit(limit))
    stages = await conn.execute(
        select(SessionStage.__table__)
        .where(SessionStage.session_id == session_id)
        .order_by(SessionStage.stage)
    )
    out = _session_dict(row, row.active)
    out["segments"] = [segment_dict(s) for s in segments]
    out["stages"] = [
        {
            "stage": st.stage,
            "stage_version": st.stage_version,
            "status": st.status,
            "attempts": st.attempts,
            "last_error": st.last_error,
            "updated_at": st.updated_at,
            "completed_at": st.completed_at,
        }
        for st in stages
    ]
    return out


def segment_dict(s: Any) -> dict[str, Any]:
    """A `segments` row as the API shows it."""
    emotion = (
        None
        if s.emotion_label is None
        else {"label": s.emotion_label, "score": s.emotion_score, "engine": s.emotion_engine}
    )
    return {
        "segment_id": s.segment_id,
        "speaker": s.speaker,
        "text": s.text,
        "start": s.start_s,
        "end": s.end_s,
        "spoken_at": s.spoken_at,
        "language": s.language,
        "stt_engine": s.stt_engine,
        "emotion": emotion,
        "overlap": list(s.overlap or []),
        "pinned": s.pinned,
        "is_sweep": s.is_sweep,
        "replaced_by": s.replaced_by,
    }
