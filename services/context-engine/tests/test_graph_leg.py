"""The graph leg (graph_leg.py) on a real engine with a real FalkorDB: entities named in the
query → the segments behind their facts, then their mentions; bounded by as_of and the
window; PostgreSQL mentions alone when there is no graph."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from engine_harness import Engine, eventually, ingest, query, start_engine, write_conversation

from context_engine.config import Settings
from context_engine.knowledge.names import query_ngrams
from context_engine.search.legs.graph import GraphLeg
from context_engine.search.query import ContextQuery

pytestmark = pytest.mark.platform

DAY1 = datetime(2025, 6, 1, 10, 0, tzinfo=UTC)
DAY2 = DAY1 + timedelta(days=3)


def test_query_ngrams() -> None:
    grams = query_ngrams("Where is Priya's  Paris trip?")
    assert {"priya", "paris", "paris trip", "where is priya"} <= set(grams)
    assert "priya's" not in grams
    assert query_ngrams("") == []


@pytest.fixture
async def engine(
    settings: Settings, falkordb_server: str, graph_group: str
) -> AsyncIterator[Engine]:
    with_graph = settings.model_copy(
        update={"graph_url": falkordb_server, "graph_group_id": graph_group}
    )
    write_conversation(with_graph.transcripts_dir, "k1", DAY1, [
        ("Asha", "My wife Priya is flying to Paris on Friday."),
        ("Ravi", "Safe travels to her."),
        ("Asha", "Priya will stay for a week."),
    ])  # fmt: skip
    write_conversation(with_graph.transcripts_dir, "k2", DAY2, [
        ("Asha", "My wife Priya called from Paris this morning."),
    ])  # fmt: skip
    async for e in start_engine(with_graph):

        async def opened(e: Engine = e) -> bool | None:
            return True if e.runtime.graph.opened else None

        await eventually(opened, "graph open")
        for sid in ("k1", "k2"):
            await ingest(e, sid)
        await e.runtime.jobs.scan_idle()

        async def graphs_done(e: Engine = e) -> bool | None:
            rows = await query(
                e, "SELECT count(*) AS n FROM session_stages WHERE stage = 'graph'"
                " AND status = 'done' AND completed_at IS NOT NULL"
            )  # fmt: skip
            return True if rows[0]["n"] == 2 else None

        await eventually(graphs_done, "both sessions in the graph")
        yield e


def ask(text: str, as_of: datetime, hours_back: float | None = None) -> ContextQuery:
    return ContextQuery(query=text, limit=10, as_of=as_of, hours_back=hours_back)


async def test_facts_first_then_mentions_bounded_in_time(engine: Engine) -> None:
    leg = GraphLeg(engine.runtime.db.main, engine.runtime.graph)
    later = DAY2 + timedelta(days=1)
    found = await leg.search(ask("who is Asha married to?", later), 10)
    # The spouse fact was said in k1-0 and again in k2-0: its sources come first.
    assert {c.segment_id for c in found[:2]} == {"k1-0", "k2-0"}
    assert [c.score for c in found] == sorted((c.score for c in found), reverse=True)

    priya = await leg.search(ask("what did priya say", later), 10)
    keys = [c.segment_id for c in priya]
    assert "k2-0" in keys and "k1-0" in keys
    # as_of between the sessions: nothing said later comes back.
    between = await leg.search(ask("what did priya say", DAY1 + timedelta(days=1)), 10)
    assert "k2-0" not in {c.segment_id for c in between} and between
    # hours_back: only the last day before as_of.
    window = await leg.search(ask("Priya", later, hours_back=48), 10)
    assert {c.segment_id for c in window} == {"k2-0"}
    # Before anything was said, and for names nobody mentioned: nothing.
    assert await leg.search(ask("Priya", DAY1 - timedelta(days=1)), 10) == []
    assert await leg.search(ask("what about Bartholomew", later), 10) == []
    assert len(await leg.search(ask("Priya", later), 1)) == 1


async def test_without_a_graph_mentions_still_answer(engine: Engine) -> None:
    leg = GraphLeg(engine.runtime.db.main, None)
    found = await leg.search(ask("Priya", DAY2 + timedelta(days=1)), 10)
    # Newest mention first: k2's, then k1's (one mention per entity and session: the
    # extractor keeps an entity's best segment, ADR 0008).
    assert [c.segment_id for c in found] == ["k2-0", "k1-0"]


async def test_context_finds_through_the_graph_what_keywords_miss(engine: Engine) -> None:
    """A query for "Asha's wife" shares no keyword match with "My wife Priya…" (Asha is the
    speaker, not a word of the text): the graph leg finds it through the spouse fact."""
    later = (DAY2 + timedelta(days=1)).isoformat()
    r = await engine.get("/v1/context", query="Asha's wife", as_of=later, limit=5)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["legs"] == {"bm25": "ok", "vector": "ok", "graph": "ok"}
    assert body["degraded"] == []
    assert {h["segment_id"] for h in body["results"]} >= {"k1-0"}
