"""Retrieval for `/v1/context`: legs search, fusion ranks, results carry their entities.

A leg (legs/: keyword, vector, graph; their interface in query.py) returns scored candidates
for a query "as of" a time. Legs run concurrently, each under its own timeout; a leg that
fails or is too slow is left out and its status says so (`legs: {"bm25": "ok",
"graph": "timeout"}`): one layer's failure degrades retrieval, never the whole answer.

Fusion (`fuse`): reciprocal rank fusion over the legs (k = `rrf_k`, each leg weighted by
`leg_weights`); then the speaker prior (a question that names exactly one of the candidates'
speakers is most often about that person's own words: their segments weigh 1 +
`speaker_boost`); then the tiers: a segment's tier is the highest memory tier of the entities
it mentions (L0 when none; tiers.py), a `tiers` filter keeps only those tiers and
`tier_weights` scale each tier's score; then temporal decay relative to `as_of` (half-life
`decay_half_life_days`, never below the evergreen floor `decay_floor`, so an old memory that is
still the best match is not buried), applied to L0 episodes only — an L1 or L2 memory is
validated as still true; then knowledge: the segments behind the current facts the response
returns about the query's subjects that replaced an older fact weigh `current_fact_weight`,
those behind facts that had ended by `as_of` (and behind no current one) `superseded_weight`,
so what is true now ranks above what used to be (query_facts.py, which also gives the response its
`about` and `facts`); then MMR over the pool (λ = `mmr_lambda`; 1.0 = relevance only) with
word-overlap similarity between texts.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from context_engine.memory.tiers import TIERS, Tier
from context_engine.memory.tiers import decay as shared_decay
from context_engine.observe.recorder import EventRecorder
from context_engine.search.admission import SearchGate
from context_engine.search.query import (
    Candidate,
    ContextQuery,
    LegStatus,
    PreparingLeg,
    RankingsLeg,
    RetrievalLeg,
)
from her_os_shared.creatures import CreatureName
from her_os_shared.events import EventType
from her_os_shared.logging import get_logger

if TYPE_CHECKING:
    from context_engine.knowledge.query_facts import Knowledge, QueryFacts

log = get_logger(__name__)

KnowledgeStatus = Literal["ok", "timeout", "error", "off"]


# The entities each segment mentions (current mentions only), for a pool of segments: the
# results' `entities`, and each candidate's tier (the highest of them) in the same query.
_SEGMENT_ENTITIES = text(
    """
    SELECT DISTINCT m.session_id, m.segment_id, e.name, e.type, e.tier
    FROM entity_mentions m
    JOIN unnest(CAST(:sids AS text[]), CAST(:gids AS text[])) AS k(sid, gid)
      ON m.session_id = k.sid AND m.segment_id = k.gid
    JOIN entities e ON e.id = m.entity_id
    WHERE m.current
    ORDER BY m.session_id, m.segment_id, e.name
    """
)

Key = tuple[str, str]


async def segment_entities(conn: AsyncConnection, keys: list[Key]) -> dict[Key, list[dict]]:
    """Each segment's entities ({name, type, tier}); a segment mentioning none is absent."""
    if not keys:
        return {}
    rows = await conn.execute(
        _SEGMENT_ENTITIES, {"sids": [s for s, _ in keys], "gids": [g for _, g in keys]}
    )
    out: dict[Key, list[dict]] = {}
    for r in rows:
        out.setdefault((r.session_id, r.segment_id), []).append(
            {"name": r.name, "type": r.type, "tier": r.tier}
        )
    return out


def segment_tier(entities: list[dict]) -> Tier:
    """A segment's tier: the highest of its entities' (L0 when it mentions none)."""
    return max((e["tier"] for e in entities), key=TIERS.index, default="L0")


class AllLegsFailedError(RuntimeError):
    pass


class UnknownLegsError(ValueError):
    """A query named legs that are not enabled (or none at all)."""


@dataclass(frozen=True, slots=True)
class FusionParams:
    rrf_k: int = 60
    # RRF weight of each leg (a leg not named weighs 1.0).
    weights: dict[str, float] = field(default_factory=dict)
    pool: int = 50  # candidates each leg is asked for when there are several legs
    decay_half_life_days: float | None = None  # None: no temporal decay
    decay_floor: float = 0.5  # the evergreen floor: decay never scales a score below this
    mmr_lambda: float = 1.0  # 1.0: relevance only (MMR off)
    speaker_boost: float = 0.0  # 0: no speaker prior
    # score multiplier per memory tier (a tier not named weighs 1.0)
    tier_weights: dict[str, float] = field(default_factory=dict)
    # score multiplier of a segment behind a fact that had ended by as_of (1.0: off)
    superseded_weight: float = 1.0
    # score multiplier of a segment behind a current fact about the query's subjects that
    # replaced an older one
    current_fact_weight: float = 1.0

    @property
    def needs_tiers(self) -> bool:
        """Whether ranking depends on the candidates' tiers."""
        neutral = all(w == 1.0 for w in self.tier_weights.values())
        return not neutral or self.decay_half_life_days is not None


@dataclass(frozen=True, slots=True)
class ContextResult:
    results: list[dict[str, Any]]
    legs: dict[str, LegStatus]
    # What is known about the query's subjects (None: no knowledge configured).
    knowledge: Knowledge | None = None
    # "ok", "timeout", "error"; "off" without a graph or knowledge reader.
    knowledge_status: KnowledgeStatus = "off"

    @property
    def degraded(self) -> list[str]:
        return [name for name, status in self.legs.items() if status != "ok"]


_WORDS = re.compile(r"\w+", re.UNICODE)


def _words(text: str) -> frozenset[str]:
    return frozenset(w.casefold() for w in _WORDS.findall(text))


def _similarity(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def decay(age_days: float, params: FusionParams) -> float:
    """The temporal weight of a memory `age_days` old: 0.5 per half-life, floored — the one
    decay definition (tiers.decay) that the nightly salience uses too."""
    return shared_decay(age_days, params.decay_half_life_days, params.decay_floor)


def named_speaker(query: str, speakers: set[str]) -> str | None:
    """The one speaker among `speakers` whose name the query contains (whole words, any case);
    None when it names none or several (a question about two people is about both)."""
    named = [
        s
        for s in speakers
        if s.strip() and re.search(rf"(?<!\w){re.escape(s.strip())}(?!\w)", query, re.IGNORECASE)
    ]
    return named[0] if len(named) == 1 else None


def mmr(cands: list[Candidate], limit: int, lam: float) -> list[Candidate]:
    """Maximal marginal relevance: repeatedly take the candidate with the best
    lam * relevance - (1 - lam) * (highest similarity to one already taken)."""
    if lam >= 1.0 or len(cands) <= 1:
        return cands[:limit]
    top = max(c.score for c in cands) or 1.0
    words = [_words(c.text) for c in cands]
    chosen: list[int] = []
    left = list(range(len(cands)))
    while left and len(chosen) < limit:

        def gain(i: int) -> float:
            redundancy = max((_similarity(words[i], words[j]) for j in chosen), default=0.0)
            return lam * cands[i].score / top - (1 - lam) * redundancy

        best = max(left, key=gain)
        chosen.append(best)
        left.remove(best)
    return [cands[i] for i in chosen]


def fuse(
    ranked: dict[str, list[Candidate]],
    limit: int,
    *,
    as_of: datetime | None = None,
    query: str | None = None,
    params: FusionParams = FusionParams(),
    tiers: Mapping[tuple[str, str], Tier] | None = None,
    tier_filter: frozenset[Tier] | None = None,
    superseded: set[tuple[str, str]] | None = None,
    current: set[tuple[str, str]] | None = None,
) -> list[Candidate]:
    """One leg: its own order and score. Several: weighted reciprocal rank fusion (score = sum
    of weight / (rrf_k + rank)), then the speaker prior for `query` and the tier weights —
    priors weighed against ranks, so they are left out of a single leg's own scores (a
    `legs=bm25` query shows what that leg alone finds). Then the tier filter (`tiers`: each
    candidate's tier, L0 when absent), decay relative to `as_of`, the `superseded` segments'
    and `current` segments' weights and MMR (module docstring)."""
    several = len(ranked) > 1
    if not several:
        (only,) = ranked.values()
        pool = [replace(c, legs={next(iter(ranked)): c.score}) for c in only]
    else:
        fused: dict[tuple[str, str], Candidate] = {}
        for leg, cands in ranked.items():
            weight = params.weights.get(leg, 1.0)
            for rank, c in enumerate(cands):
                key = (c.session_id, c.segment_id)
                hit = fused.setdefault(key, replace(c, score=0.0, legs={}))
                hit.score += weight / (params.rrf_k + rank + 1)
                hit.legs[leg] = c.score
        pool = list(fused.values())
    if several and query and params.speaker_boost:
        speaker = named_speaker(query, {c.speaker for c in pool})
        for c in pool:
            if c.speaker == speaker:
                c.score *= 1 + params.speaker_boost

    def tier_of(c: Candidate) -> Tier:
        return "L0" if tiers is None else tiers.get((c.session_id, c.segment_id), "L0")

    if tiers is not None:
        if tier_filter is not None:
            pool = [c for c in pool if tier_of(c) in tier_filter]
        if several:
            for c in pool:
                c.score *= params.tier_weights.get(tier_of(c), 1.0)
    if as_of is not None and params.decay_half_life_days is not None:
        for c in pool:
            if tier_of(c) == "L0":  # L1/L2 are validated as still true: no decay
                c.score *= decay((as_of - c.spoken_at).total_seconds() / 86400, params)
    for keys, weight in ((superseded, params.superseded_weight),
                         (current, params.current_fact_weight)):  # fmt: skip
        if keys and weight != 1.0:
            for c in pool:
                if (c.session_id, c.segment_id) in keys:
                    c.score *= weight
    pool.sort(key=lambda c: (-c.score, c.spoken_at))
    return mmr(pool, limit, params.mmr_lambda)


class Retriever:
    def __init__(
        self,
        engine: AsyncEngine,
        legs: list[RetrievalLeg],
        recorder: EventRecorder | None = None,
        *,
        params: FusionParams = FusionParams(),
        leg_timeout_s: float = 2.0,
        knowledge: QueryFacts | None = None,
        max_inflight: int = 64,
        running: int = 0,
    ) -> None:
        self.engine = engine
        self.legs = legs
        self.recorder = recorder
        self.params = params
        self.leg_timeout_s = leg_timeout_s
        self.knowledge = knowledge
        self.gate = SearchGate(max_inflight, running)

    async def _know(self, q: ContextQuery) -> tuple[Knowledge | None, KnowledgeStatus]:
        """What is known about the query's subjects, and how the lookup went: a failing or
        slow graph leaves the results as they are (status "error" / "timeout")."""
        if self.knowledge is None:
            return None, "off"
        if not self.knowledge.available:  # no graph: the statements still come (PostgreSQL)
            try:
                async with asyncio.timeout(self.leg_timeout_s):
                    found = await self.knowledge.lookup(q)
            except Exception as exc:  # TimeoutError too: statements are an extra here
                log.warning("retrieve.statements_failed", error=repr(exc)[:500])
                return None, "off"
            from context_engine.knowledge.query_facts import Knowledge

            return Knowledge(statements=found.statements), "off"
        status: KnowledgeStatus
        try:
            async with asyncio.timeout(self.leg_timeout_s):
                return await self.knowledge.lookup(q), "ok"
        except TimeoutError:
            status = "timeout"
        except Exception as exc:
            log.warning("retrieve.knowledge_failed", error=repr(exc)[:500])
            status = "error"
        if self.recorder:
            await self.recorder.emit(
                CreatureName.SQUID, EventType.ERROR, data={"status": status, "of": "facts"}
            )
        return None, status

    async def _run_leg(
        self, leg: RetrievalLeg, q: ContextQuery, k: int, *, fused: bool
    ) -> dict[str, list[Candidate]]:
        """The leg's ranking(s): all of a `RankingsLeg`'s when fused, else its own."""
        started = time.perf_counter()
        async with asyncio.timeout(self.leg_timeout_s):
            if fused and isinstance(leg, RankingsLeg):
                found = await leg.rankings(q, k)
            else:
                found = {leg.name: await leg.search(q, k)}
        if self.recorder:
            ms = round((time.perf_counter() - started) * 1000, 1)
            hits = len(found[leg.name])
            await self.recorder.emit(
                leg.creature,
                EventType.COMPLETE,
                data={"hits": hits, "asked": k, "ms": ms},
                reasoning=f"{leg.name}: {hits} candidates in {ms:.0f} ms",
            )
        return found

    def _legs_for(self, q: ContextQuery) -> list[RetrievalLeg]:
        """The legs a query asks for (all enabled ones by default); UnknownLegsError names
        any it asks for that are not enabled."""
        enabled = [leg.name for leg in self.legs]
        unknown = sorted(set(q.legs or ()) - set(enabled))
        if unknown or q.legs == frozenset():
            raise UnknownLegsError(
                f"legs: {', '.join(unknown) or 'none given'} not among the enabled legs "
                f"({', '.join(enabled)})"
            )
        return [leg for leg in self.legs if q.legs is None or leg.name in q.legs]

    def _pool(self, q: ContextQuery, legs: int) -> int:
        """How many candidates each leg is asked for."""
        # Several legs (or a tier filter) need a pool to fuse (or filter) from.
        k = max(q.limit, self.params.pool) if legs > 1 or q.tiers else q.limit
        if self.params.mmr_lambda < 1.0:
            k = max(k, q.limit * 3)  # MMR needs a pool larger than what it returns
        return k

    async def _collect(
        self, legs: list[RetrievalLeg], outcomes: list[Any]
    ) -> tuple[dict[str, list[Candidate]], dict[str, LegStatus]]:
        """Each leg's rankings and status: a leg that failed or timed out is left out, logged
        and reported; a cancellation goes on up."""
        ranked: dict[str, list[Candidate]] = {}
        status: dict[str, LegStatus] = {}
        for leg, outcome in zip(legs, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                if isinstance(outcome, asyncio.CancelledError):
                    raise outcome
                timed_out = isinstance(outcome, TimeoutError)
                status[leg.name] = "timeout" if timed_out else "error"
                log.warning("retrieve.leg_failed", leg=leg.name, status=status[leg.name],
                            error=repr(outcome)[:500])  # fmt: skip
                if self.recorder:
                    await self.recorder.emit(
                        leg.creature,
                        EventType.ERROR,
                        data={"status": status[leg.name], "error": repr(outcome)[:300]},
                    )
                continue
            status[leg.name] = "ok"
            ranked.update(outcome)
        return ranked, status

    async def retrieve(self, q: ContextQuery) -> ContextResult:
        """The fused search (`OverloadedError` at once when too many already run)."""
        async with self.gate.admit():
            self._prepare(q)
            async with self.gate.turn():
                return await self._retrieve(q)

    def _prepare(self, q: ContextQuery) -> None:
        """Let the query's legs start what needs no turn (the vector leg's query embedding,
        in a worker thread and batched with the others waiting) while the search waits."""
        try:
            legs = self._legs_for(q)
        except UnknownLegsError:
            return  # _retrieve says so
        for leg in legs:
            if isinstance(leg, PreparingLeg):
                leg.prepare(q)

    async def _retrieve(self, q: ContextQuery) -> ContextResult:
        started = time.perf_counter()
        legs = self._legs_for(q)
        k = self._pool(q, len(legs))
        knowing = asyncio.create_task(self._know(q))
        try:
            outcomes = await asyncio.gather(
                *(self._run_leg(leg, q, k, fused=len(legs) > 1) for leg in legs),
                return_exceptions=True,
            )
        except BaseException:
            knowing.cancel()
            raise
        try:
            ranked, status = await self._collect(legs, outcomes)
        except BaseException:
            knowing.cancel()
            raise
        if not ranked:
            knowing.cancel()
            raise AllLegsFailedError(
                "every retrieval leg failed: "
                + ", ".join(f"{name} ({s})" for name, s in status.items())
            )
        knowledge, knowledge_status = await knowing
        tiers = None
        if q.tiers is not None or self.params.needs_tiers:
            # the whole pool's entities: its tiers now, the results' entities after fusion
            keys = list({(c.session_id, c.segment_id) for cs in ranked.values() for c in cs})
            entities = await self._entities(keys, required=q.tiers is not None)
            tiers = {key: segment_tier(found) for key, found in entities.items()}
        best = fuse(
            ranked,
            q.limit,
            as_of=q.as_of,
            query=q.query,
            params=self.params,
            tiers=tiers,
            tier_filter=q.tiers,
            superseded=knowledge.superseded_sources if knowledge else None,
            current=knowledge.current_sources if knowledge else None,
        )
        if tiers is None:
            entities = await self._entities([(c.session_id, c.segment_id) for c in best])
        if self.recorder:
            ms = round((time.perf_counter() - started) * 1000, 1)
            pool = len({(c.session_id, c.segment_id) for cs in ranked.values() for c in cs})
            await self.recorder.emit(
                CreatureName.PUFFERFISH,
                EventType.COMPLETE,
                data={"legs": dict(status), "candidates": pool, "results": len(best), "ms": ms,
                      "tiers": sorted(q.tiers) if q.tiers else None},
                reasoning=f"fused {len(ranked)} of {len(status)} legs: {pool} candidates → "
                f"{len(best)} results in {ms:.0f} ms",
            )  # fmt: skip
        results = [
            {
                "text": c.text,
                "tier": segment_tier(entities.get((c.session_id, c.segment_id), [])),
                "source_session": c.session_id,
                "segment_id": c.segment_id,
                "timestamp": c.spoken_at,
                "relevance_score": round(c.score, 6),
                "speaker": c.speaker,
                "entities": entities.get((c.session_id, c.segment_id), []),
            }
            for c in best
        ]
        return ContextResult(results, status, knowledge, knowledge_status)

    async def _entities(self, keys: list[Key], *, required: bool = False) -> dict[Key, list[dict]]:
        """The segments' entities; on failure none (they enrich results and their absence must
        not fail them), unless `required` (a tier filter cannot be applied without them)."""
        try:
            async with self.engine.connect() as conn:
                return await segment_entities(conn, keys)
        except Exception as exc:
            if required:
                raise
            log.warning("retrieve.entities_failed", error=repr(exc)[:300])
            return {}
