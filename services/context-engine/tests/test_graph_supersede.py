"""Supersession across objects on a real FalkorDB, through the no-LLM writer: a single-valued
slot ("lives in Pune" → "lives in Mumbai"), usage per category (Nike → Hoka shoes), explicit
endings ("switched from Nike"); arrival order, reinstatement when the ending fact goes, and
the relation properties (category, when, valid_from, source) the writer keeps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from falkordb_harness import cypher, episode

from context_engine.extract.base import Extraction
from context_engine.extract.schema import ExtractedEntity, ExtractedRelation
from context_engine.graph import KnowledgeGraph
from context_engine.graph.base import GraphWrite

pytest_plugins = ["falkordb_harness"]
pytestmark = pytest.mark.platform

T1 = datetime(2024, 3, 1, 10, 0, tzinfo=UTC)
T2 = T1 + timedelta(days=30)
T3 = T1 + timedelta(days=60)


def rel(s: str, p: str, o: str, segment: str, **properties: Any) -> ExtractedRelation:
    return ExtractedRelation(
        s, p, o, 0.85, evidence=f"{s} {p} {o}", segment_id=segment, properties=properties
    )


async def say(
    graph: KnowledgeGraph, sid: str, when: datetime, *relations: ExtractedRelation
) -> GraphWrite:
    ep = episode(sid, when, [("Rajesh", f"line {i}") for i in range(3)])
    return await graph.write_extraction(ep, Extraction([], list(relations)), "fast@1")


async def stored(graph: KnowledgeGraph, fact: str) -> dict[str, Any]:
    [row] = await cypher(
        graph,
        "MATCH ()-[e:RELATES_TO {fact: $fact}]->() RETURN e.uuid AS uuid, e.name AS name, "
        "e.valid_at AS valid_at, e.invalid_at AS invalid_at, e.expired_at AS expired_at, "
        "e.invalidated_by AS invalidated_by, e.category AS category, e.when AS when_, "
        "e.valid_from AS valid_from, e.source AS source",
        fact=fact,
    )
    return row


async def current(graph: KnowledgeGraph, at: datetime) -> set[str]:
    return {f.fact for f in await graph.facts_as_of(at)}


@pytest.mark.parametrize("order", ["in order", "newer first"])
async def test_a_new_city_ends_the_old_one_whatever_the_arrival_order(
    knowledge_graph: KnowledgeGraph, order: str
) -> None:
    old = ("s1", T1, rel("Rajesh", "lives_in", "Pune", "s1-0"))
    new = ("s2", T2, rel("Rajesh", "lives_in", "Mumbai", "s2-0"))
    writes = [
        await say(knowledge_graph, *x) for x in ([old, new] if order == "in order" else [new, old])
    ]
    [ended] = writes[1].invalidated
    assert writes[0].invalidated == []
    assert (ended.fact, ended.predicate, ended.subject, ended.object) == (
        "Rajesh lives in Pune",
        "LIVES_IN",
        "Rajesh",
        "Pune",
    )
    assert (ended.session_id, ended.invalidated_by_session, ended.invalid_at) == ("s1", "s2", T2)
    pune = await stored(knowledge_graph, "Rajesh lives in Pune")
    mumbai = await stored(knowledge_graph, "Rajesh lives in Mumbai")
    assert pune["invalidated_by"] == mumbai["uuid"] == ended.invalidated_by
    assert pune["invalid_at"] == T2.isoformat() and pune["expired_at"] is not None
    assert mumbai["invalid_at"] is None
    assert await current(knowledge_graph, T1 + timedelta(days=1)) == {"Rajesh lives in Pune"}
    assert await current(knowledge_graph, T2 + timedelta(days=1)) == {"Rajesh lives in Mumbai"}
    # the Mumbai node is a place: the predicate's object type
    [node] = await knowledge_graph.find_entity_nodes("Mumbai")
    assert node.type == "place"


async def test_employers_and_the_daily_drink_hold_one_at_a_time(
    knowledge_graph: KnowledgeGraph,
) -> None:
    await say(
        knowledge_graph, "s1", T1,
        rel("Rajesh", "works_at", "Infosys", "s1-0"), rel("Rajesh", "drinks", "coffee", "s1-1"),
        rel("Rajesh", "likes", "coffee", "s1-1"),
    )  # fmt: skip
    write = await say(
        knowledge_graph, "s2", T2,
        rel("Rajesh", "works_at", "Google", "s2-0"), rel("Rajesh", "drinks", "tea", "s2-1"),
    )  # fmt: skip
    assert sorted(f.fact for f in write.invalidated) == [
        "Rajesh drinks coffee",
        "Rajesh works at Infosys",
    ]
    assert await current(knowledge_graph, T2 + timedelta(days=1)) == {
        "Rajesh works at Google",
        "Rajesh drinks tea",
        "Rajesh likes coffee",  # a preference is not the daily drink
    }


async def test_usage_ends_per_category(knowledge_graph: KnowledgeGraph) -> None:
    await say(
        knowledge_graph, "s1", T1,
        rel("Rajesh", "uses", "Nike", "s1-0", category="shoe"),
        rel("Rajesh", "uses", "Kindle", "s1-1", category="e-reader"),
    )  # fmt: skip
    write = await say(
        knowledge_graph, "s2", T2, rel("Rajesh", "uses", "Hoka", "s2-0", category="shoe")
    )
    assert [f.fact for f in write.invalidated] == ["Rajesh uses Nike"]
    assert await current(knowledge_graph, T2 + timedelta(days=1)) == {
        "Rajesh uses Hoka",
        "Rajesh uses Kindle",
    }
    assert (await stored(knowledge_graph, "Rajesh uses Hoka"))["category"] == "shoe"


async def test_switched_from_ends_liking_and_using(knowledge_graph: KnowledgeGraph) -> None:
    await say(
        knowledge_graph, "s1", T1,
        rel("Rajesh", "likes", "Nike", "s1-0"), rel("Rajesh", "uses", "Nike", "s1-1"),
        rel("Rajesh", "likes", "Adidas", "s1-2"),
    )  # fmt: skip
    write = await say(knowledge_graph, "s2", T2, rel("Rajesh", "switched_from", "Nike", "s2-0"))
    switched = await stored(knowledge_graph, "Rajesh switched away from Nike")
    assert sorted(f.fact for f in write.invalidated) == ["Rajesh likes Nike", "Rajesh uses Nike"]
    assert {f.invalidated_by for f in write.invalidated} == {switched["uuid"]}
    assert await current(knowledge_graph, T2 + timedelta(days=1)) == {
        "Rajesh likes Adidas",
        "Rajesh switched away from Nike",
    }


async def test_avoiding_ends_drinking_and_liking(knowledge_graph: KnowledgeGraph) -> None:
    await say(
        knowledge_graph, "s1", T1,
        rel("Rajesh", "drinks", "coffee", "s1-0"), rel("Rajesh", "likes", "coffee", "s1-1"),
    )  # fmt: skip
    write = await say(knowledge_graph, "s2", T2, rel("Rajesh", "avoids", "coffee", "s2-0"))
    assert sorted(f.fact for f in write.invalidated) == [
        "Rajesh drinks coffee",
        "Rajesh likes coffee",
    ]


async def test_rewriting_the_ending_session_without_the_ending_fact_reinstates(
    knowledge_graph: KnowledgeGraph,
) -> None:
    await say(
        knowledge_graph, "s1", T1,
        rel("Rajesh", "lives_in", "Pune", "s1-0"), rel("Rajesh", "likes", "Nike", "s1-1"),
    )  # fmt: skip
    ending = (
        rel("Rajesh", "lives_in", "Mumbai", "s2-0"),
        rel("Rajesh", "switched_from", "Nike", "s2-1"),
    )
    first = await say(knowledge_graph, "s2", T2, *ending)
    ended = sorted(f.fact_uuid for f in first.invalidated)
    assert len(ended) == 2
    # the same session written again with the same facts changes nothing
    again = await say(knowledge_graph, "s2", T2, *ending)
    assert (again.invalidated, again.reinstated) == ([], [])
    # a new extractor version no longer finds the move nor the switch
    redone = await say(knowledge_graph, "s2", T2, rel("Rajesh", "likes", "tea", "s2-0"))
    assert sorted(redone.reinstated) == ended and redone.invalidated == []
    for fact in ("Rajesh lives in Pune", "Rajesh likes Nike"):
        row = await stored(knowledge_graph, fact)
        assert (row["invalid_at"], row["invalidated_by"], row["expired_at"]) == (None, None, None)


async def test_forgetting_the_ending_session_reinstates(knowledge_graph: KnowledgeGraph) -> None:
    await say(knowledge_graph, "s1", T1, rel("Rajesh", "works_at", "Infosys", "s1-0"))
    write = await say(knowledge_graph, "s2", T2, rel("Rajesh", "works_at", "Google", "s2-0"))
    [ended] = write.invalidated
    forgotten = await knowledge_graph.forget_session("s2")
    assert forgotten.reinstated == [ended.fact_uuid]
    assert await current(knowledge_graph, T3) == {"Rajesh works at Infosys"}


async def test_a_third_session_between_moves_the_end(knowledge_graph: KnowledgeGraph) -> None:
    await say(knowledge_graph, "s1", T1, rel("Rajesh", "lives_in", "Pune", "s1-0"))
    await say(knowledge_graph, "s3", T3, rel("Rajesh", "lives_in", "Delhi", "s3-0"))
    middle = await say(knowledge_graph, "s2", T2, rel("Rajesh", "moved_to", "Mumbai", "s2-0"))
    # Pune now ends when Mumbai began; Mumbai, written late, is born ended by Delhi
    by_fact = {f.fact: f for f in middle.invalidated}
    assert set(by_fact) == {"Rajesh lives in Pune", "Rajesh moved to Mumbai"}
    assert by_fact["Rajesh lives in Pune"].invalid_at == T2
    assert by_fact["Rajesh moved to Mumbai"].invalid_at == T3
    assert by_fact["Rajesh moved to Mumbai"].invalidated_by_session == "s3"


async def test_relation_properties_become_attributes_and_date_the_fact(
    knowledge_graph: KnowledgeGraph,
) -> None:
    march = "2024-01-15"
    await say(
        knowledge_graph, "s1", T1,
        rel("Rajesh", "lives_in", "Mumbai", "s1-1", when="since January", valid_from=march,
            source="pattern:lives_in", category="", ignored="x"),
        # said again later in the session, with other properties: the first saying is kept
        rel("Rajesh", "lives_in", "Mumbai", "s1-2", when="now", source="other"),
        # a valid_from after the words were spoken is not believed
        rel("Rajesh", "works_at", "Google", "s1-0", valid_from="2030-01-01T00:00:00"),
        rel("Rajesh", "drinks", "tea", "s1-0", valid_from="not a date"),
    )  # fmt: skip
    mumbai = await stored(knowledge_graph, "Rajesh lives in Mumbai")
    assert mumbai["valid_at"] == datetime(2024, 1, 15, tzinfo=UTC).isoformat()
    assert (mumbai["when_"], mumbai["valid_from"], mumbai["source"]) == (
        "since January",
        march,
        "pattern:lives_in",
    )
    assert mumbai["category"] is None  # empty properties are not kept
    google = await stored(knowledge_graph, "Rajesh works at Google")
    assert google["valid_at"] == T1.isoformat() and google["valid_from"] == "2030-01-01T00:00:00"
    tea = await stored(knowledge_graph, "Rajesh drinks tea")
    assert tea["valid_at"] == T1.isoformat()
    [fact] = [
        f for f in await knowledge_graph.facts_as_of(T2) if f.fact == "Rajesh lives in Mumbai"
    ]
    assert fact.attributes["when"] == "since January" and fact.segment_ids == ["s1-1"]
    assert "ignored" not in fact.attributes
    # valid_from dates the fact for supersession too: Pune (said on 1 January) ends when
    # Mumbai began (15 January), not when Mumbai was mentioned (1 March)
    new_year = datetime(2024, 1, 1, 9, 0, tzinfo=UTC)
    write = await say(knowledge_graph, "s0", new_year, rel("Rajesh", "lives_in", "Pune", "s0-0"))
    [ended] = write.invalidated
    assert ended.fact == "Rajesh lives in Pune"
    assert ended.invalid_at == datetime(2024, 1, 15, tzinfo=UTC)


async def test_other_subjects_and_entity_objects_are_left_alone(
    knowledge_graph: KnowledgeGraph,
) -> None:
    place = ExtractedEntity("place", "Pune", 0.9, evidence="Pune", segment_id="s1-0")
    await knowledge_graph.write_extraction(
        episode("s1", T1, [("Asha", "We both live in Pune.")]),
        Extraction(
            [place],
            [rel("Asha", "lives_in", "Pune", "s1-0"), rel("Bob", "lives_in", "Pune", "s1-0")],
        ),
        "fast@1",
    )
    write = await say(knowledge_graph, "s2", T2, rel("Asha", "lives_in", "Mumbai", "s2-0"))
    assert [f.fact for f in write.invalidated] == ["Asha lives in Pune"]
    assert (await stored(knowledge_graph, "Bob lives in Pune"))["invalid_at"] is None
