"""Fusion and leg handling of retrieve.py: RRF, temporal decay with its evergreen floor, MMR,
per-leg timeouts and failures (legs here are test doubles; the real legs have their own
tests and run through /v1/context in test_api.py)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from context_engine.knowledge.query_facts import Knowledge
from context_engine.search.admission import OverloadedError
from context_engine.search.query import Candidate, ContextQuery
from context_engine.search.retrieve import (
    AllLegsFailedError,
    FusionParams,
    Retriever,
    UnknownLegsError,
    decay,
    fuse,
    mmr,
    named_speaker,
)

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def cand(gid: str, score: float = 1.0, text: str = "", days_ago: float = 0.0) -> Candidate:
    return Candidate("s", gid, text or gid, "alice", NOW - timedelta(days=days_ago), score)


def ids(cands: list[Candidate]) -> list[str]:
    return [c.segment_id for c in cands]


def test_one_leg_keeps_its_order_and_scores() -> None:
    out = fuse({"bm25": [cand("a", 0.9), cand("b", 0.5)]}, 5)
    assert ids(out) == ["a", "b"] and out[0].score == 0.9 and out[0].legs == {"bm25": 0.9}


def test_rrf_rewards_agreement_between_legs() -> None:
    ranked = {
        "bm25": [cand("a"), cand("b"), cand("c")],
        "graph": [cand("c"), cand("d")],
    }
    out = fuse(ranked, 10, params=FusionParams(rrf_k=60))
    assert ids(out)[0] == "c"  # ranks 3 and 1: 1/63 + 1/61 beats 1/61 alone
    c = out[0]
    assert c.score == pytest.approx(1 / 63 + 1 / 61) and set(c.legs) == {"bm25", "graph"}
    assert ids(out)[1] == "a"  # rank 1 in one leg: 1/61
    assert set(ids(out)[2:4]) == {"b", "d"}  # rank 2 in one leg each: 1/62
    assert len(fuse(ranked, 2)) == 2


def test_leg_weights_scale_each_legs_share() -> None:
    ranked = {"bm25": [cand("a"), cand("b")], "graph": [cand("b"), cand("a")]}
    even = fuse(ranked, 10)
    assert even[0].score == pytest.approx(even[1].score)  # a tie: rank 1 + rank 2 each
    light_graph = fuse(ranked, 10, params=FusionParams(weights={"graph": 0.5}))
    assert ids(light_graph) == ["a", "b"]
    assert light_graph[0].score == pytest.approx(1 / 61 + 0.5 / 62)
    heavy_graph = fuse(ranked, 10, params=FusionParams(weights={"graph": 2.0}))
    assert ids(heavy_graph) == ["b", "a"]


def test_named_speaker_is_the_one_speaker_a_query_names_as_a_whole_word() -> None:
    speakers = {"Priya", "Jon", "Dr. K", "", "SPEAKER_01"}
    assert named_speaker("What does priya paint?", speakers) == "Priya"
    assert named_speaker("Did Dr. K call back?", speakers) == "Dr. K"  # no regex surprises
    assert named_speaker("Where did Jonathan go?", speakers) is None  # not a whole word
    assert named_speaker("Which city have Priya and Jon both seen?", speakers) is None
    assert named_speaker("What is the weather like?", speakers) is None


def _said(gid: str, speaker: str) -> Candidate:
    return replace(cand(gid), speaker=speaker)


def test_speaker_prior_lifts_the_named_speakers_own_words() -> None:
    ranked = {
        "bm25": [_said("m1", "Mel"), _said("c1", "Caro"), _said("m2", "Mel")],
        "vector": [_said("m1", "Mel"), _said("c1", "Caro"), _said("m2", "Mel")],
    }
    p = FusionParams(rrf_k=10, speaker_boost=0.5)
    assert ids(fuse(ranked, 3, query="What does Caro paint?", params=p)) == ["c1", "m1", "m2"]
    lifted = fuse(ranked, 3, query="What does Caro paint?", params=p)[0]
    assert lifted.score == pytest.approx(1.5 * 2 / 12)
    # No prior: when it is off, when no speaker or both speakers are named.
    assert ids(fuse(ranked, 3, query="What does Caro paint?")) == ["m1", "c1", "m2"]
    assert ids(fuse(ranked, 3, query="What do they paint?", params=p)) == ["m1", "c1", "m2"]
    both = "Did Caro and Mel paint?"
    assert ids(fuse(ranked, 3, query=both, params=p)) == ["m1", "c1", "m2"]
    one_leg = {"bm25": ranked["bm25"]}
    assert ids(fuse(one_leg, 3, query="What does Caro paint?", params=p)) == ["m1", "c1", "m2"]


def test_tier_filter_weights_and_decay_of_episodes_only() -> None:
    ranked = {"bm25": [cand("ep", 1.0), cand("fact", 0.9), cand("pattern", 0.8)]}
    tiers = {("s", "fact"): "L1", ("s", "pattern"): "L2"}  # "ep" mentions nothing: L0
    assert ids(fuse(ranked, 5, tiers=tiers, tier_filter=frozenset({"L1", "L2"}))) == [
        "fact", "pattern"
    ]  # fmt: skip
    heavy = FusionParams(rrf_k=10, tier_weights={"L2": 2.0})
    two = {"bm25": ranked["bm25"], "vector": ranked["bm25"]}
    assert ids(fuse(two, 5, tiers=tiers, params=heavy)) == ["pattern", "ep", "fact"]
    # One leg keeps its own order and scores: the weights are a prior of fusion.
    assert ids(fuse(ranked, 5, tiers=tiers, params=heavy)) == ["ep", "fact", "pattern"]
    assert heavy.needs_tiers and not FusionParams().needs_tiers
    # Decay ages episodes; a validated fact a year old keeps its score.
    old = {"bm25": [cand("fact", 0.9, days_ago=365), cand("ep", 0.8, days_ago=365)]}
    p = FusionParams(decay_half_life_days=30, decay_floor=0.1)
    out = fuse(old, 5, as_of=NOW, params=p, tiers={("s", "fact"): "L1"})
    assert [(c.segment_id, round(c.score, 3)) for c in out] == [("fact", 0.9), ("ep", 0.08)]


def test_decay_halves_per_half_life_down_to_the_evergreen_floor() -> None:
    p = FusionParams(decay_half_life_days=30, decay_floor=0.3)
    assert decay(0, p) == 1.0 and decay(30, p) == pytest.approx(0.5)
    assert decay(60, p) == pytest.approx(0.3)  # 0.25 would be below the floor
    assert decay(-5, p) == 1.0  # a clock skew never boosts
    assert decay(1000, FusionParams()) == 1.0  # no half-life: no decay


def test_decay_reorders_relative_to_as_of_but_an_old_strong_match_survives() -> None:
    p = FusionParams(decay_half_life_days=7, decay_floor=0.5)
    ranked = {"bm25": [cand("old", 0.9, days_ago=365), cand("new", 0.6, days_ago=1)]}
    out = fuse(ranked, 2, as_of=NOW, params=p)
    assert ids(out) == ["new", "old"]  # 0.6 * 0.906 > 0.9 * 0.5
    strong = {"bm25": [cand("old", 0.9, days_ago=365), cand("new", 0.3, days_ago=1)]}
    assert ids(fuse(strong, 2, as_of=NOW, params=p)) == ["old", "new"]  # the floor keeps it


def test_mmr_skips_near_duplicates_only_when_asked() -> None:
    pool = [
        cand("a", 1.0, "priya flies to paris on friday"),
        cand("b", 0.95, "priya flies to paris on friday morning"),
        cand("c", 0.7, "the dentist appointment moved to monday"),
    ]
    assert ids(mmr(pool, 2, 1.0)) == ["a", "b"]
    assert ids(mmr(pool, 2, 0.5)) == ["a", "c"]
    assert ids(mmr(pool, 5, 0.5)) == ["a", "c", "b"]


@given(
    st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=0, max_size=30),
    st.floats(min_value=0.0, max_value=1.0),
    st.integers(min_value=1, max_value=40),
)
def test_mmr_returns_distinct_candidates_from_the_pool(scores, lam, limit) -> None:
    pool = [cand(f"g{i}", s, f"word{i % 4} other{i % 3}") for i, s in enumerate(scores)]
    out = mmr(pool, limit, lam)
    assert len(out) == min(limit, len(pool))
    assert len(set(ids(out))) == len(out) and set(ids(out)) <= set(ids(pool))


class AnsweringLegDouble:
    def __init__(self, name: str, cands: list[Candidate]) -> None:
        self.name, self.creature, self.cands = name, "starfish", cands
        self.asked_k: int | None = None

    async def search(self, q: ContextQuery, k: int) -> list[Candidate]:
        self.asked_k = k
        return self.cands[:k]


class HangingLegDouble:
    name, creature = "vector", "shark"

    async def search(self, q: ContextQuery, k: int) -> list[Candidate]:
        await asyncio.Event().wait()  # never answers: only the timeout ends it
        return []


class FailingLegDouble:
    name, creature = "graph", "squid"

    async def search(self, q: ContextQuery, k: int) -> list[Candidate]:
        raise RuntimeError("graph server gone")


def query(limit: int = 5) -> ContextQuery:
    return ContextQuery(query="priya", limit=limit, as_of=NOW)


async def test_a_slow_and_a_failing_leg_are_reported_and_the_rest_answers(engine_db) -> None:
    ok = AnsweringLegDouble("bm25", [cand("a"), cand("b")])
    retriever = Retriever(
        engine_db, [ok, HangingLegDouble(), FailingLegDouble()], leg_timeout_s=0.2
    )
    result = await retriever.retrieve(query())
    assert result.legs == {"bm25": "ok", "vector": "timeout", "graph": "error"}
    assert result.degraded == ["vector", "graph"]
    assert [r["segment_id"] for r in result.results] == ["a", "b"]
    assert ok.asked_k == 50  # several legs: each is asked for the candidate pool


async def test_a_query_can_run_a_subset_of_the_legs(engine_db) -> None:
    bm25 = AnsweringLegDouble("bm25", [cand("a"), cand("b")])
    vector = AnsweringLegDouble("vector", [cand("b"), cand("c")])
    retriever = Retriever(engine_db, [bm25, vector, FailingLegDouble()])
    alone = await retriever.retrieve(replace(query(), legs=frozenset({"vector"})))
    assert alone.legs == {"vector": "ok"} and bm25.asked_k is None
    assert [r["segment_id"] for r in alone.results] == ["b", "c"]
    assert vector.asked_k == 5  # one leg: asked for the limit, not the pool
    both = await retriever.retrieve(replace(query(), legs=frozenset({"bm25", "vector"})))
    assert both.legs == {"bm25": "ok", "vector": "ok"}
    assert both.results[0]["segment_id"] == "b"  # found by both legs
    with pytest.raises(UnknownLegsError, match=r"legs: elsewhere not among the enabled legs"):
        await retriever.retrieve(replace(query(), legs=frozenset({"elsewhere"})))


async def test_every_leg_failing_is_an_error_naming_them(engine_db) -> None:
    retriever = Retriever(engine_db, [HangingLegDouble(), FailingLegDouble()], leg_timeout_s=0.1)
    with pytest.raises(AllLegsFailedError, match=r"vector \(timeout\), graph \(error\)"):
        await retriever.retrieve(query())


async def test_mmr_asks_the_legs_for_a_larger_pool(engine_db) -> None:
    ok = AnsweringLegDouble("bm25", [cand(f"g{i}") for i in range(30)])
    retriever = Retriever(engine_db, [ok], params=FusionParams(mmr_lambda=0.5))
    result = await retriever.retrieve(query(limit=5))
    assert ok.asked_k == 15 and len(result.results) == 5


@pytest.fixture
async def engine_db(db_url: str):
    """An engine for the entities lookup results get (an empty, migrated database)."""
    from sqlalchemy.ext.asyncio import create_async_engine

    from context_engine.store.migrate import upgrade

    await asyncio.to_thread(upgrade, db_url)
    eng = create_async_engine(db_url)
    yield eng
    await eng.dispose()


class TwoRankingLegDouble(AnsweringLegDouble):
    """A leg with a second ranking (as the keyword leg's `bm25_next`): `rankings` when fused."""

    def __init__(self, own: list[Candidate], other: list[Candidate]) -> None:
        super().__init__("bm25", own)
        self.other = other
        self.rankings_asked = 0

    async def rankings(self, q: ContextQuery, k: int) -> dict[str, list[Candidate]]:
        self.rankings_asked += 1
        return {"bm25": await self.search(q, k), "bm25_next": self.other[:k]}


async def test_a_legs_second_ranking_is_fused_on_its_own_weight(engine_db) -> None:
    leg = TwoRankingLegDouble([cand("a"), cand("b")], [cand("b"), cand("c")])
    vector = AnsweringLegDouble("vector", [cand("c"), cand("a")])
    params = FusionParams(rrf_k=10, weights={"bm25_next": 0.5, "vector": 1.5})
    retriever = Retriever(engine_db, [leg, vector], params=params)
    fused = await retriever.retrieve(query())
    # Statuses are per leg; the second ranking counts in the scores.
    assert fused.legs == {"bm25": "ok", "vector": "ok"} and leg.rankings_asked == 1
    scores = {r["segment_id"]: r["relevance_score"] for r in fused.results}
    assert scores == pytest.approx({
        "a": 1 / 11 + 1.5 / 12, "b": 1 / 12 + 0.5 / 11, "c": 0.5 / 12 + 1.5 / 11,
    }, abs=1e-6)  # fmt: skip
    # Alone, the leg is its own ranking (a `legs=bm25` query shows what that leg finds).
    alone = await retriever.retrieve(replace(query(), legs=frozenset({"bm25"})))
    assert [r["segment_id"] for r in alone.results] == ["a", "b"] and leg.rankings_asked == 1


def test_segments_behind_ended_facts_fall_and_behind_current_ones_rise() -> None:
    ranked = {"bm25": [cand("old", 0.9), cand("plain", 0.8), cand("new", 0.7)]}
    params = FusionParams(superseded_weight=0.5, current_fact_weight=1.5)
    off = fuse(ranked, 3, params=FusionParams())
    assert ids(off) == ["old", "plain", "new"]
    out = fuse(ranked, 3, params=params, superseded={("s", "old")}, current={("s", "new")})
    assert ids(out) == ["new", "plain", "old"]
    # A weight of 1.0 switches each off.
    same = fuse(ranked, 3, superseded={("s", "old")}, current={("s", "new")})
    assert ids(same) == ids(off)


class KnowledgeDouble:
    """Test double of query_facts.QueryFacts: answers, fails or hangs."""

    def __init__(self, how: str) -> None:
        self.how = how
        self.available = True

    async def lookup(self, q: ContextQuery) -> Knowledge:
        if self.how == "fail":
            raise RuntimeError("graph gone")
        if self.how == "hang":
            await asyncio.Event().wait()
        return Knowledge(superseded_sources={("s", "a")}, current_sources={("s", "b")})


async def test_knowledge_reorders_results_and_its_failure_only_drops_the_facts(
    engine_db,
) -> None:
    legs = [AnsweringLegDouble("bm25", [cand("a"), cand("b")])]
    params = FusionParams(superseded_weight=0.5)
    kinds = {}
    for how in ("ok", "fail", "hang"):
        retriever = Retriever(
            engine_db, legs, params=params, knowledge=KnowledgeDouble(how), leg_timeout_s=0.2
        )
        kinds[how] = await retriever.retrieve(query())
    assert kinds["ok"].knowledge_status == "ok" and kinds["ok"].knowledge is not None
    # One leg keeps its own scores; the superseded segment still falls below the other.
    assert [r["segment_id"] for r in kinds["ok"].results] == ["b", "a"]
    assert kinds["fail"].knowledge_status == "error" and kinds["fail"].knowledge is None
    assert kinds["hang"].knowledge_status == "timeout"
    for how in ("fail", "hang"):
        assert [r["segment_id"] for r in kinds[how].results] == ["a", "b"]
        assert kinds[how].legs == {"bm25": "ok"}
    plain = await Retriever(engine_db, legs).retrieve(query())
    assert plain.knowledge_status == "off" and plain.knowledge is None


class GatedLegDouble:
    """Answers once `release` is set: searches pile up in flight until then."""

    name, creature = "bm25", "starfish"

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.two_started = asyncio.Event()
        self.started = 0

    async def search(self, q: ContextQuery, k: int) -> list[Candidate]:
        self.started += 1
        if self.started == 2:
            self.two_started.set()
        await self.release.wait()
        return [cand("a")]


async def test_past_the_limit_of_searches_in_flight_a_new_one_is_refused_at_once(
    engine_db,
) -> None:
    leg = GatedLegDouble()
    retriever = Retriever(engine_db, [leg], leg_timeout_s=30, max_inflight=2)
    running = [asyncio.create_task(retriever.retrieve(query())) for _ in range(2)]
    await asyncio.wait_for(leg.two_started.wait(), timeout=30)
    with pytest.raises(OverloadedError, match=r"2 searches are running") as refused:
        await retriever.retrieve(query())  # at once: it never reaches the leg
    assert refused.value.retry_after_s == 1 and leg.started == 2
    leg.release.set()
    done = await asyncio.gather(*running)
    assert [r.results[0]["segment_id"] for r in done] == ["a", "a"]
    assert retriever.gate.inflight == 0 and retriever.gate.refused == 1
    # the slots are back: the next search runs; a failing one gives its slot back too
    assert (await retriever.retrieve(query())).results[0]["segment_id"] == "a"
    with pytest.raises(UnknownLegsError):
        await retriever.retrieve(replace(query(), legs=frozenset({"elsewhere"})))
    assert retriever.gate.inflight == 0


async def test_past_the_running_limit_admitted_searches_wait_their_turn(engine_db) -> None:
    """Of the searches admitted, at most `running` execute at once; the next one starts when
    one finishes, and waiting counts against the in-flight limit."""
    leg = GatedLegDouble()
    retriever = Retriever(engine_db, [leg], leg_timeout_s=30, max_inflight=3, running=1)
    first = asyncio.create_task(retriever.retrieve(query()))
    second = asyncio.create_task(retriever.retrieve(query()))
    for _ in range(20):  # give the second every chance to start, which it must not
        await asyncio.sleep(0)
    assert leg.started == 1 and retriever.gate.inflight == 2
    third = asyncio.create_task(retriever.retrieve(query()))
    await asyncio.sleep(0)
    with pytest.raises(OverloadedError):  # waiting ones count: 3 in flight
        await retriever.retrieve(query())
    leg.release.set()  # every search may finish now, one after the other
    done = await asyncio.gather(first, second, third)
    assert leg.started == 3 and [r.results[0]["segment_id"] for r in done] == ["a"] * 3
    assert retriever.gate.inflight == 0


class PreparingLegDouble(GatedLegDouble):
    """Test double: a gated leg that records the queries it was asked to prepare."""

    def __init__(self) -> None:
        super().__init__()
        self.prepared: list[str] = []

    def prepare(self, q: ContextQuery) -> None:
        self.prepared.append(q.query)


async def test_a_waiting_search_prepares_its_legs_before_its_turn(engine_db) -> None:
    """The query embedding needs no turn: a search waiting behind another has its legs
    prepared at once, and each search is prepared once."""
    leg = PreparingLegDouble()
    retriever = Retriever(engine_db, [leg], leg_timeout_s=30, max_inflight=3, running=1)
    first = asyncio.create_task(retriever.retrieve(query()))
    second = asyncio.create_task(retriever.retrieve(replace(query(), query="who is asha")))
    for _ in range(20):
        await asyncio.sleep(0)
    assert leg.started == 1 and leg.prepared == ["priya", "who is asha"]
    leg.release.set()
    await asyncio.gather(first, second)
    assert leg.prepared == ["priya", "who is asha"] and leg.started == 2
    with pytest.raises(UnknownLegsError):  # a query naming no enabled leg prepares nothing
        await retriever.retrieve(replace(query(), legs=frozenset({"elsewhere"})))
    assert len(leg.prepared) == 2


async def test_an_overloaded_search_is_a_503_with_retry_after() -> None:
    import httpx
    from fastapi import FastAPI

    from context_engine.config import Settings
    from context_engine.routes import context as context_route
    from context_engine.routes.deps import _retriever, _settings

    class RefusingRetriever:
        async def retrieve(self, q: ContextQuery) -> None:
            raise OverloadedError(64)

    app = FastAPI()
    app.include_router(context_route.router, prefix="/v1")
    app.dependency_overrides[_retriever] = RefusingRetriever
    app.dependency_overrides[_settings] = lambda: Settings(_env_file=None)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://engine") as client:
        r = await client.get("/v1/context", params={"query": "where does Priya live"})
    assert r.status_code == 503 and r.headers["retry-after"] == "1"
    assert "64 searches are running" in r.json()["detail"]
    assert "MAX_INFLIGHT_SEARCHES" in r.json()["detail"]
