"""What a search is asked and what its legs give back: the request (`ContextQuery`), a scored
segment (`Candidate`), the leg interface (`RetrievalLeg`, `RankingsLeg`) and the check every leg
makes of its index's hits in PostgreSQL (`fetch_active`). retrieve.py fuses; legs/ search."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from context_engine.memory.tiers import Tier

LegStatus = Literal["ok", "timeout", "error"]


@dataclass(frozen=True, slots=True)
class ContextQuery:
    query: str
    limit: int
    as_of: datetime
    hours_back: float | None = None
    # Run only these legs (names of configured legs); None = every configured leg.
    legs: frozenset[str] | None = None
    # Only segments of these memory tiers; None = every tier.
    tiers: frozenset[Tier] | None = None
    # Who "I", "me" and "my" in the query are (None: the engine's owner; query_facts.py).
    me: str | None = None


@dataclass(slots=True)
class Candidate:
    session_id: str
    segment_id: str
    text: str
    speaker: str
    spoken_at: datetime
    score: float
    legs: dict[str, float] = field(default_factory=dict)


# Hits of a leg's own index, re-checked in PostgreSQL: still stored, still active (not
# replaced by a sweep), spoken by as_of and inside the window.
_FETCH_ACTIVE = text(
    """
    SELECT s.session_id, s.segment_id, s.text, s.speaker, s.spoken_at
    FROM segments s
    JOIN unnest(CAST(:sids AS text[]), CAST(:gids AS text[])) AS k(sid, gid)
      ON s.session_id = k.sid AND s.segment_id = k.gid
    WHERE s.replaced_by IS NULL AND s.spoken_at <= :as_of
      AND (CAST(:since AS timestamptz) IS NULL OR s.spoken_at >= CAST(:since AS timestamptz))
    """
)


async def fetch_active(
    conn: AsyncConnection, keys: list[tuple[str, str]], as_of: datetime, since: datetime | None
) -> dict[tuple[str, str], Any]:
    """The rows of those (session, segment) keys that a search as of `as_of` may return."""
    if not keys:
        return {}
    rows = await conn.execute(
        _FETCH_ACTIVE,
        {
            "sids": [s for s, _ in keys],
            "gids": [g for _, g in keys],
            "as_of": as_of,
            "since": since,
        },
    )
    return {(r.session_id, r.segment_id): r for r in rows}


class RetrievalLeg(Protocol):
    name: str
    creature: str

    async def search(self, q: ContextQuery, k: int) -> list[Candidate]: ...


@runtime_checkable
class PreparingLeg(RetrievalLeg, Protocol):
    """A leg with work that can start before its search's turn (search/admission.py):
    `prepare` starts it in the background and returns; `search` uses it when it is done."""

    def prepare(self, q: ContextQuery) -> None: ...


@runtime_checkable
class RankingsLeg(RetrievalLeg, Protocol):
    """A leg that ranks by more than one document of a segment: inside a fused request it
    returns each ranking by name (its own first), each weighed by fusion on its own."""

    async def rankings(self, q: ContextQuery, k: int) -> dict[str, list[Candidate]]: ...
