"""Reading the graph on a real FalkorDB: facts as of a time (valid time and the belief view),
neighbourhoods with their segments, entity lookup, and graphiti's own search over what the
no-LLM writer wrote."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from falkordb_harness import cypher, episode

from context_engine.extract.base import Extraction
from context_engine.extract.schema import ExtractedEntity, ExtractedRelation
from context_engine.graph import KnowledgeGraph

# The FalkorDB fixtures; the root conftest may register the plugin as well.
pytest_plugins = ["falkordb_harness"]


pytestmark = pytest.mark.platform

T1 = datetime(2024, 3, 1, 10, 0, tzinfo=UTC)
T2 = T1 + timedelta(days=3)


def rel(s: str, p: str, o: str, segment: str) -> ExtractedRelation:
    return ExtractedRelation(s, p, o, 0.85, evidence=f"{s} {p} {o}", segment_id=segment)


async def coffee_story(graph: KnowledgeGraph) -> None:
    """s1 (T1): Asha's wife Priya; Asha likes coffee; Bob likes coffee.
    s2 (T2): Asha avoids coffee; Priya promised to call the plumber."""
    await graph.write_extraction(
        episode(
            "s1",
            T1,
            [("Asha", "My wife Priya is here."), ("Asha", "I like coffee."), ("Bob", "Me too.")],
        ),
        Extraction(
            [ExtractedEntity("person", "Priya", 0.9, segment_id="s1-0")],
            [
                rel("Asha", "spouse", "Priya", "s1-0"),
                rel("Asha", "likes", "coffee", "s1-1"),
                rel("Bob", "likes", "coffee", "s1-2"),
            ],
        ),
        "fast@1",
    )
    await graph.write_extraction(
        episode("s2", T2, [("Asha", "I avoid coffee now."), ("Priya", "I'll call the plumber.")]),
        Extraction(
            [
                ExtractedEntity(
                    "promise",
                    "I'll call the plumber",
                    0.8,
                    properties={"speaker": "Priya"},
                    segment_id="s2-1",
                )
            ],
            [rel("Asha", "avoids", "coffee", "s2-0")],
        ),
        "fast@1",
    )


async def test_facts_as_of_before_and_after_supersession(knowledge_graph: KnowledgeGraph) -> None:
    await coffee_story(knowledge_graph)
    before = await knowledge_graph.facts_as_of(T1 + timedelta(days=1))
    assert sorted(f.fact for f in before) == [
        "Asha likes coffee",
        "Asha's spouse is Priya",
        "Bob likes coffee",
    ]
    after = await knowledge_graph.facts_as_of(T2 + timedelta(hours=1))
    assert sorted(f.fact for f in after) == [
        "Asha avoids coffee",
        "Asha's spouse is Priya",
        "Bob likes coffee",
        "Priya promised: I'll call the plumber",
    ]
    # the boundaries: valid from valid_at (inclusive), invalid from invalid_at
    at_t2 = {f.fact for f in await knowledge_graph.facts_as_of(T2)}
    assert "Asha avoids coffee" in at_t2 and "Asha likes coffee" not in at_t2
    assert await knowledge_graph.facts_as_of(T1 - timedelta(seconds=1)) == []
    # by subject, and by node on either side
    asha = {f.fact for f in await knowledge_graph.facts_as_of(T1 + timedelta(days=1), "asha")}
    assert asha == {"Asha likes coffee", "Asha's spouse is Priya"}
    [priya] = await knowledge_graph.find_entity_nodes("Priya")
    about_priya = await knowledge_graph.facts_as_of(T2 + timedelta(hours=1), entity_uuid=priya.uuid)
    assert sorted(f.fact for f in about_priya) == [
        "Asha's spouse is Priya",
        "Priya promised: I'll call the plumber",
    ]


async def test_facts_carry_times_sessions_and_segments(knowledge_graph: KnowledgeGraph) -> None:
    await coffee_story(knowledge_graph)
    facts = await knowledge_graph.facts_as_of(T1 + timedelta(days=1))
    [likes] = [f for f in facts if f.predicate == "LIKES" and f.subject == "Asha"]
    assert likes.valid_at == T1 + timedelta(seconds=10)  # when segment s1-1 was spoken
    assert likes.invalid_at == T2 and likes.expired_at is not None
    assert likes.session_ids == ["s1"] and likes.segment_ids == ["s1-1"]
    assert likes.sources == [("s1", "s1-1")]
    assert likes.attributes["confidence"] == 0.85 and "fact_embedding" not in likes.attributes


async def test_known_at_is_the_belief_view(knowledge_graph: KnowledgeGraph) -> None:
    await coffee_story(knowledge_graph)
    written = await cypher(
        knowledge_graph,
        "MATCH ()-[e:RELATES_TO {fact: 'Asha avoids coffee'}]->() RETURN e.created_at AS c",
    )
    learnt = datetime.fromisoformat(str(written[0]["c"]))
    day_after = T2 + timedelta(days=1)
    # before the graph learnt of s2, it believed Asha still liked coffee
    believed = {
        f.fact
        for f in await knowledge_graph.facts_as_of(
            day_after, known_at=learnt - timedelta(microseconds=1)
        )
    }
    assert "Asha likes coffee" in believed and "Asha avoids coffee" not in believed
    now = {f.fact for f in await knowledge_graph.facts_as_of(day_after, known_at=datetime.now(UTC))}
    assert "Asha avoids coffee" in now and "Asha likes coffee" not in now


async def test_restatements_collapse(knowledge_graph: KnowledgeGraph) -> None:
    for sid, when in (("s1", T1), ("s2", T2)):
        await knowledge_graph.write_extraction(
            episode(sid, when, [("Asha", "I like tea.")]),
            Extraction([], [rel("Asha", "likes", "tea", f"{sid}-0")]),
            "fast@1",
        )
    later = T2 + timedelta(days=1)
    [fact] = await knowledge_graph.facts_as_of(later)
    assert fact.valid_at == T2 and fact.session_ids == ["s2", "s1"]
    assert fact.segment_ids == ["s2-0", "s1-0"] and len(fact.episodes) == 2
    assert fact.sources == [("s2", "s2-0"), ("s1", "s1-0")]
    assert len(await knowledge_graph.facts_as_of(later, collapse=False)) == 2


async def test_neighbourhood(knowledge_graph: KnowledgeGraph) -> None:
    await coffee_story(knowledge_graph)
    [asha] = await knowledge_graph.find_entity_nodes("ASHA")
    hood = await knowledge_graph.neighbourhood(asha.uuid)
    assert hood is not None and hood.node.name == "Asha" and hood.node.type == "person"
    assert sorted(n.name for n in hood.neighbours) == ["Priya", "coffee"]
    by_fact = {f.fact: f for f in hood.facts}
    assert set(by_fact) == {"Asha's spouse is Priya", "Asha likes coffee", "Asha avoids coffee"}
    assert by_fact["Asha likes coffee"].invalid_at == T2  # invalid facts are part of the history
    assert by_fact["Asha avoids coffee"].segment_ids == ["s2-0"]
    assert by_fact["Asha's spouse is Priya"].session_ids == ["s1"]
    assert hood.facts[0].fact == "Asha's spouse is Priya"  # oldest first
    assert [(e.session_id, e.valid_at) for e in hood.episodes] == [("s1", T1), ("s2", T2)]
    # two hops: Bob (via coffee) and Priya's promise
    wide = await knowledge_graph.neighbourhood(asha.uuid, depth=2)
    assert wide is not None
    assert {"Bob", "I'll call the plumber"} <= {n.name for n in wide.neighbours}
    assert "Bob likes coffee" in {f.fact for f in wide.facts}
    assert await knowledge_graph.neighbourhood("no-such-node") is None


async def test_find_entity_nodes(knowledge_graph: KnowledgeGraph) -> None:
    await coffee_story(knowledge_graph)
    [coffee] = await knowledge_graph.find_entity_nodes("Coffee")
    assert coffee.type == "topic" and coffee.labels == ["Topic"]
    assert await knowledge_graph.find_entity_nodes("coffee", type="person") == []
    assert [n.name for n in await knowledge_graph.find_entity_nodes("priya", type="Person")] == [
        "Priya"
    ]
    assert await knowledge_graph.find_entity_nodes("  ") == []
    assert (await knowledge_graph.get_node(coffee.uuid)) == coffee


async def test_graphiti_search_finds_written_facts(knowledge_graph: KnowledgeGraph) -> None:
    await coffee_story(knowledge_graph)
    found = await knowledge_graph.search("what does Asha drink?", limit=5)
    facts = [f.fact for f in found]
    assert "Asha avoids coffee" in facts and "Asha likes coffee" in facts
    assert found[0].session_ids  # full Fact records
    # as of a time: only what was true then
    then = [
        f.fact for f in await knowledge_graph.search("Asha coffee", as_of=T1 + timedelta(days=1))
    ]
    assert "Asha likes coffee" in then and "Asha avoids coffee" not in then
    # graphiti's own API, no help from us, reads the same graph (no LLM involved).
    # (Graphiti.search sets the limit on graphiti's shared recipe object: restore it.)
    from graphiti_core.search.search_config_recipes import EDGE_HYBRID_SEARCH_RRF

    shared_limit = EDGE_HYBRID_SEARCH_RRF.limit
    try:
        edges = await knowledge_graph.graphiti.search(
            "plumber", group_ids=[knowledge_graph.group_id], num_results=3
        )
    finally:
        EDGE_HYBRID_SEARCH_RRF.limit = shared_limit
    assert [e.fact for e in edges][:1] == ["Priya promised: I'll call the plumber"]
    assert await knowledge_graph.search("   ") == []


async def test_healthy(knowledge_graph: KnowledgeGraph) -> None:
    assert await knowledge_graph.healthy()
    await knowledge_graph.close()
    assert not await knowledge_graph.healthy()
