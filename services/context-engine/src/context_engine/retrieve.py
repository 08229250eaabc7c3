"""Retrieval for `/v1/context`: legs search, fusion ranks, results carry their entities.

A leg (bm25.py now; the vector and graph legs with issue 6) returns scored candidates for a
query "as of" a time. Legs run concurrently; a leg that fails is left out and named in
`degraded` (one layer's failure degrades retrieval, never the whole answer). Adding a leg is
adding it to the list: the route and the response do not change.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from context_engine.models import Entity, EntityMention
from context_engine.recorder import EventRecorder
from her_os_shared.logging import get_logger

log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class ContextQuery:
    query: str
    limit: int
    as_of: datetime
    hours_back: float | None = None


@dataclass(slots=True)
class Candidate:
    session_id: str
    segment_id: str
    text: str
    speaker: str
    spoken_at: datetime
    score: float
    legs: dict[str, float] = field(default_factory=dict)


class RetrievalLeg(Protocol):
    name: str
    creature: str

    async def search(self, q: ContextQuery, k: int) -> list[Candidate]: ...


class AllLegsFailedError(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class ContextResult:
    results: list[dict[str, Any]]
    legs: list[str]
    degraded: list[str]


def fuse(ranked: dict[str, list[Candidate]], limit: int) -> list[Candidate]:
    """One leg: its own order and score. Several: reciprocal rank fusion (k=60), the score
    being the fused one. (Issue 6 adds temporal decay and MMR here.)"""
    if len(ranked) == 1:
        (only,) = ranked.values()
        return only[:limit]
    fused: dict[tuple[str, str], Candidate] = {}
    for leg, cands in ranked.items():
        for rank, c in enumerate(cands):
            key = (c.session_id, c.segment_id)
            hit = fused.setdefault(key, replace(c, score=0.0, legs={}))
            hit.score += 1.0 / (60 + rank + 1)
            hit.legs[leg] = c.score
    return sorted(fused.values(), key=lambda c: (-c.score, c.spoken_at))[:limit]


class Retriever:
    def __init__(
        self,
        engine: AsyncEngine,
        legs: list[RetrievalLeg],
        recorder: EventRecorder | None = None,
    ) -> None:
        self.engine = engine
        self.legs = legs
        self.recorder = recorder

    async def retrieve(self, q: ContextQuery) -> ContextResult:
        k = max(q.limit, 20) if len(self.legs) > 1 else q.limit
        outcomes = await asyncio.gather(
            *(leg.search(q, k) for leg in self.legs), return_exceptions=True
        )
        ranked: dict[str, list[Candidate]] = {}
        degraded: list[str] = []
        for leg, outcome in zip(self.legs, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                if isinstance(outcome, asyncio.CancelledError):
                    raise outcome
                degraded.append(leg.name)
                log.warning("retrieve.leg_failed", leg=leg.name, error=repr(outcome)[:500])
                if self.recorder:
                    await self.recorder.emit(
                        leg.creature, "error", data={"error": repr(outcome)[:300]}
                    )
                continue
            ranked[leg.name] = outcome
        if not ranked:
            raise AllLegsFailedError(f"every retrieval leg failed: {', '.join(degraded)}")
        best = fuse(ranked, q.limit)
        entities = await self._entities([(c.session_id, c.segment_id) for c in best])
        results = [
            {
                "text": c.text,
                "source_session": c.session_id,
                "segment_id": c.segment_id,
                "timestamp": c.spoken_at,
                "relevance_score": round(c.score, 6),
                "speaker": c.speaker,
                "entities": entities.get((c.session_id, c.segment_id), []),
            }
            for c in best
        ]
        return ContextResult(results, list(ranked), degraded)

    async def _entities(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], list[dict]]:
        if not keys:
            return {}
        out: dict[tuple[str, str], list[dict]] = {}
        try:
            async with self.engine.connect() as conn:
                rows = await conn.execute(
                    select(
                        EntityMention.session_id,
                        EntityMention.segment_id,
                        Entity.name,
                        Entity.type,
                    )
                    .join(Entity, Entity.id == EntityMention.entity_id)
                    .where(
                        EntityMention.session_id.in_({s for s, _ in keys}),
                        EntityMention.segment_id.in_({g for _, g in keys}),
                        EntityMention.current,
                    )
                    .distinct()
                )
                for sid, gid, name, etype in rows:
                    if (sid, gid) in keys:
                        out.setdefault((sid, gid), []).append({"name": name, "type": etype})
        except Exception as exc:  # entities enrich results; their absence must not fail them
            log.warning("retrieve.entities_failed", error=repr(exc)[:300])
        return out
