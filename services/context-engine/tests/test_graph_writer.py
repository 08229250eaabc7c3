"""The no-LLM graph writer on a real FalkorDB: graphiti's schema, idempotency, cross-session
entity resolution, supersession (pair-scoped, order-independent, nothing deleted)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from falkordb_harness import cypher, episode

from context_engine.extract.base import Extraction
from context_engine.extract.schema import ExtractedEntity, ExtractedRelation
from context_engine.graph import KnowledgeGraph
from context_engine.graph.supersede import TimelineFact, resolve_timeline, scope

# The FalkorDB fixtures; the root conftest may register the plugin as well.
pytest_plugins = ["falkordb_harness"]

T1 = datetime(2024, 3, 1, 10, 0, tzinfo=UTC)
T2 = T1 + timedelta(days=3)
T3 = T1 + timedelta(days=10)


def rel(s: str, p: str, o: str, segment: str, conf: float = 0.85) -> ExtractedRelation:
    return ExtractedRelation(s, p, o, conf, evidence=f"{s} {p} {o}", segment_id=segment)


def person(name: str, segment: str | None = None) -> ExtractedEntity:
    return ExtractedEntity("person", name, 0.9, evidence=name, segment_id=segment)


async def counts(graph: KnowledgeGraph) -> dict[str, int]:
    async def one(query: str) -> int:
        return int((await cypher(graph, query))[0]["n"])

    return {
        "entities": await one("MATCH (n:Entity) RETURN count(n) AS n"),
        "episodes": await one("MATCH (n:Episodic) RETURN count(n) AS n"),
        "facts": await one("MATCH ()-[e:RELATES_TO]->() RETURN count(e) AS n"),
        "mentions": await one("MATCH ()-[e:MENTIONS]->() RETURN count(e) AS n"),
    }


async def edge(graph: KnowledgeGraph, uuid: str) -> dict[str, object]:
    rows = await cypher(
        graph,
        "MATCH ()-[e:RELATES_TO {uuid: $uuid}]->() RETURN e.fact AS fact, "
        "e.valid_at AS valid_at, e.invalid_at AS invalid_at, e.expired_at AS expired_at, "
        "e.invalidated_by AS invalidated_by",
        uuid=uuid,
    )
    assert len(rows) == 1
    return rows[0]


async def facts_named(graph: KnowledgeGraph, fact: str) -> list[dict[str, object]]:
    return await cypher(
        graph,
        "MATCH ()-[e:RELATES_TO {fact: $fact}]->() RETURN e.uuid AS uuid, "
        "e.invalid_at AS invalid_at, e.invalidated_by AS invalidated_by",
        fact=fact,
    )


# --- the timeline rule itself (no database) ---


def tf(
    uuid: str,
    name: str,
    day: int,
    created: int = 0,
    *,
    source: str = "a",
    target: str = "b",
    category: str | None = None,
    target_name: str = "",
) -> TimelineFact:
    return TimelineFact(
        uuid,
        source,
        target,
        name,
        T1 + timedelta(days=day),
        T1 + timedelta(seconds=created),
        None,
        None,
        category=category,
        target_name=target_name,
    )


def ended_by(facts: list[TimelineFact]) -> dict[str, str | None]:
    return {u: v.invalidated_by for u, v in resolve_timeline(facts).items()}


def test_timeline_newer_fact_of_another_state_ends_the_older() -> None:
    verdicts = resolve_timeline(
        [tf("like", "LIKES", 0), tf("love", "LOVES", 1), tf("avoid", "AVOIDS", 2)]
    )
    # a restatement in the same state (loves) ends nothing; avoids ends both
    assert verdicts["like"].invalidated_by == "avoid"
    assert verdicts["love"].invalid_at == T1 + timedelta(days=2)
    assert verdicts["avoid"].invalid_at is None


def test_timeline_is_independent_of_arrival_order() -> None:
    facts = [tf("avoid", "AVOIDS", 2, created=1), tf("like", "LIKES", 0, created=2)]
    assert resolve_timeline(facts)["like"].invalidated_by == "avoid"
    assert resolve_timeline(reversed(facts))["like"].invalidated_by == "avoid"


def test_timeline_tie_goes_to_the_later_written_fact() -> None:
    verdicts = resolve_timeline(
        [tf("ex", "EX_SPOUSE", 1, created=5), tf("wed", "SPOUSE", 1, created=1)]
    )
    assert verdicts["wed"].invalidated_by == "ex" and verdicts["ex"].invalid_at is None


def test_single_valued_group_ends_the_older_object() -> None:
    # rule 2: one place of residence, one employer, one daily drink at a time
    assert ended_by(
        [
            tf("pune", "LIVES_IN", 0, target="pune"),
            tf("mumbai", "MOVED_TO", 5, target="mumbai"),
            tf("again", "LIVES_IN", 9, target="mumbai"),  # a restatement ends nothing
            tf("infosys", "WORKS_AT", 1, target="infosys"),
            tf("google", "WORKS_AT", 6, target="google"),
            tf("coffee", "DRINKS", 2, target="coffee"),
            tf("tea", "DRINKS", 3, target="tea"),
            tf("bob_pune", "LIVES_IN", 0, source="bob", target="pune"),  # another subject
            tf("likes_x", "LIKES", 1, target="x"),  # preferences hold many objects
            tf("likes_y", "LIKES", 2, target="y"),
        ]
    ) == {
        "pune": "mumbai",
        "mumbai": None,
        "again": None,
        "infosys": "google",
        "google": None,
        "coffee": "tea",
        "tea": None,
        "bob_pune": None,
        "likes_x": None,
        "likes_y": None,
    }


def test_single_valued_slot_ends_at_the_newer_facts_valid_at() -> None:
    [verdict] = [
        v
        for u, v in resolve_timeline(
            [tf("pune", "LIVES_IN", 0, target="pune"), tf("mumbai", "LIVES_IN", 4, target="m")]
        ).items()
        if u == "pune"
    ]
    assert verdict.invalid_at == T1 + timedelta(days=4)


def test_an_off_fact_is_not_ended_by_another_object() -> None:
    # "moved away from Pune" is itself true; only rule 1 (same pair) ends it
    assert ended_by(
        [
            tf("left_pune", "MOVED_FROM", 0, target="pune"),
            tf("mumbai", "LIVES_IN", 3, target="mumbai"),
            tf("back", "LIVES_IN", 7, target="pune"),
        ]
    ) == {"left_pune": "back", "mumbai": "back", "back": None}


def test_objects_named_at_the_same_moment_are_both_true() -> None:
    assert ended_by(
        [
            tf("nike", "USES", 0, created=1, target="nike", category="shoe"),
            tf("hoka", "USES", 0, created=2, target="hoka", category="shoe"),
        ]
    ) == {"nike": None, "hoka": None}


def test_usage_is_single_valued_per_category() -> None:
    assert ended_by(
        [
            tf("nike", "USES", 0, target="nike", category="shoe"),
            tf("kindle", "OWNS", 1, target="kindle", category="e-reader"),
            tf("hoka", "USES", 2, target="hoka", category="Shoe"),
            tf("mug", "OWNS", 0, target="mug"),  # no category: never ended by another object
            tf("pen", "OWNS", 3, target="pen"),
        ]
    ) == {"nike": "hoka", "kindle": None, "hoka": None, "mug": None, "pen": None}


def test_explicit_endings_end_other_groups_on_the_same_pair() -> None:
    # rule 3: "switched from Nike" ends liking and using Nike; "avoids coffee" ends drinking
    # it as well as liking it (rule 1); "stopped tennis" ends playing it
    assert ended_by(
        [
            tf("likes_nike", "LIKES", 0, target="nike"),
            tf("uses_nike", "USES", 1, target="nike", category="shoe"),
            tf("likes_hoka", "LIKES", 1, target="hoka"),
            tf("switched", "SWITCHED_FROM", 4, target="nike"),
            tf("drinks", "DRINKS", 0, target="coffee"),
            tf("likes_coffee", "LOVES", 1, target="coffee"),
            tf("avoids", "AVOIDS", 3, target="coffee"),
            tf("plays", "PLAYS", 0, target="tennis"),
            tf("stopped", "STOPPED", 2, target="tennis"),
        ]
    ) == {
        "likes_nike": "switched",
        "uses_nike": "switched",
        "likes_hoka": None,
        "drinks": "avoids",
        "likes_coffee": "avoids",
        "avoids": None,
        "plays": "stopped",
        "stopped": None,
    }


def test_explicit_endings_do_not_end_off_facts_or_later_facts() -> None:
    assert ended_by(
        [
            tf("stopped_using", "STOPPED_USING", 0, target="nike"),  # off: rule 1 only
            tf("switched", "SWITCHED_FROM", 2, target="nike"),
            tf("likes_again", "LIKES", 5, target="nike"),  # said after the switch
        ]
    ) == {"stopped_using": None, "likes_again": None}


def test_an_explicit_ending_said_at_the_same_moment_wins() -> None:
    # "I don't drink coffee any more" may yield drinks and avoids from one segment
    assert ended_by(
        [tf("avoids", "AVOIDS", 0, created=1), tf("drinks", "DRINKS", 0, created=2)]
    ) == {"avoids": None, "drinks": "avoids"}


def test_llm_synonyms_take_part() -> None:
    assert ended_by(
        [tf("infosys", "WORKS_FOR", 0, target="i"), tf("google", "EMPLOYED_BY", 1, target="g")]
    ) == {"infosys": "google", "google": None}


def test_one_object_under_two_nodes_is_the_same_object() -> None:
    # "Nike" a topic in one session and an organisation in another: still the pair's object
    assert ended_by(
        [
            tf("likes", "LIKES", 0, target="topic-nike", target_name="Nike"),
            tf("switched", "SWITCHED_FROM", 1, target="org-nike", target_name="nike"),
            tf("pune", "LIVES_IN", 2, target="place-pune", target_name="Pune"),
            tf("pune2", "LIVES_IN", 3, target="topic-pune", target_name="pune"),
        ]
    ) == {"likes": "switched", "pune": None, "pune2": None}


def test_mixed_timeline_is_independent_of_arrival_order() -> None:
    import itertools

    facts = [
        tf("pune", "LIVES_IN", 0, target="pune"),
        tf("mumbai", "MOVED_TO", 3, target="mumbai"),
        tf("left_mumbai", "MOVED_FROM", 6, target="mumbai"),
        tf("nike", "USES", 1, target="nike", category="shoe"),
        tf("switched", "SWITCHED_FROM", 4, target="nike"),
        tf("hoka", "USES", 4, created=1, target="hoka", category="shoe"),
    ]
    expected = {
        "pune": "mumbai",
        "mumbai": "left_mumbai",
        "left_mumbai": None,
        "nike": "switched",  # both end it at day 4: the first written wins
        "hoka": None,
    }
    for order in itertools.permutations(facts):
        assert ended_by(list(order)) == expected


def test_a_fact_whose_ender_is_gone_is_reinstated() -> None:
    pune = tf("pune", "LIVES_IN", 0, target="pune")
    pune.invalid_at, pune.invalidated_by = T1 + timedelta(days=3), "mumbai"
    # the Mumbai fact was removed (its session re-written without it): Pune is valid again
    verdicts = resolve_timeline([pune, tf("other", "LIVES_IN", 5, source="bob", target="x")])
    assert verdicts["pune"].invalid_at is None and verdicts["pune"].invalidated_by is None


def test_scope_loads_the_groups_that_can_end_one_another() -> None:
    residence = scope([("asha", "pune", "LIVES_IN")])
    assert residence.subjects == ("asha",)
    assert {"LIVES_IN", "MOVED_TO", "MOVED_FROM", "LIVED_IN", "RESIDES_IN"} <= set(residence.names)
    assert "LIKES" not in residence.names and residence.symmetric_names == ()
    # avoids ends drinks and uses; switched_from and stopped end likes: one family
    having = set(scope([("asha", "coffee", "AVOIDS")]).names)
    assert {"LIKES", "AVOIDS", "DRINKS", "USES", "STOPPED", "SWITCHED_FROM", "PLAYS"} <= having
    assert "LIVES_IN" not in having
    # symmetric pairs: both people's timelines, and the edges pointing at them
    marriage = scope([("ravi", "asha", "EX_SPOUSE")])
    assert marriage.subjects == ("asha", "ravi") and "SPOUSE" in marriage.symmetric_names
    # facts outside the table touch no timeline
    assert scope([("asha", "ravi", "FRIEND"), ("asha", "x", "PROMISED")]).subjects == ()


def test_foreign_invalidation_is_left_alone() -> None:
    ended_elsewhere = tf("like", "LIKES", 0)
    ended_elsewhere.invalid_at = T1 + timedelta(days=1)  # set by graphiti's LLM, not by us
    verdicts = resolve_timeline([ended_elsewhere, tf("avoid", "AVOIDS", 2)])
    assert "like" not in verdicts


# --- on FalkorDB ---


@pytest.mark.platform
async def test_written_objects_are_graphitis_own(knowledge_graph: KnowledgeGraph) -> None:
    from graphiti_core.edges import EntityEdge
    from graphiti_core.nodes import EntityNode, EpisodicNode

    ep = episode("s1", T1, [("Asha", "My wife Priya is lovely.")])
    write = await knowledge_graph.write_extraction(
        ep,
        Extraction([person("Priya", "s1-0")], [rel("Asha", "spouse", "Priya", "s1-0")]),
        "fast@1",
    )
    driver = knowledge_graph.graphiti.driver
    episode_node = await EpisodicNode.get_by_uuid(driver, write.episode_uuid)
    assert episode_node.name == "session-s1" and episode_node.valid_at == T1
    assert episode_node.content == "Asha: My wife Priya is lovely."
    assert episode_node.group_id == knowledge_graph.group_id
    [fact_uuid] = episode_node.entity_edges
    fact = await EntityEdge.get_by_uuid(driver, fact_uuid)
    assert fact.name == "SPOUSE" and fact.fact == "Asha's spouse is Priya"
    assert fact.valid_at == T1 and fact.episodes == [write.episode_uuid]
    assert fact.attributes["segment_id"] == "s1-0" and fact.attributes["session_id"] == "s1"
    assert fact.attributes["extractor"] == "fast@1"
    priya = await EntityNode.get_by_uuid(driver, fact.target_node_uuid)
    assert priya.name == "Priya" and "Person" in priya.labels
    assert priya.attributes["type"] == "person" and priya.attributes["canonical_name"] == "priya"
    await priya.load_name_embedding(driver)
    assert priya.name_embedding is not None and len(priya.name_embedding) == 384


@pytest.mark.platform
async def test_writing_a_session_twice_changes_nothing(knowledge_graph: KnowledgeGraph) -> None:
    ep = episode("s1", T1, [("Asha", "My wife Priya likes tea."), ("Priya", "I'll call mom.")])
    extraction = Extraction(
        [
            person("Priya", "s1-0"),
            ExtractedEntity(
                "promise", "I'll call mom", 0.8, properties={"speaker": "Priya"}, segment_id="s1-1"
            ),
        ],
        [rel("Asha", "spouse", "Priya", "s1-0"), rel("Priya", "likes", "tea", "s1-0")],
    )
    first = await knowledge_graph.write_extraction(ep, extraction, "fast@1")
    before = await counts(knowledge_graph)
    created = await cypher(
        knowledge_graph, "MATCH ()-[e:RELATES_TO]->() RETURN e.uuid AS u, e.created_at AS c"
    )
    second = await knowledge_graph.write_extraction(ep, extraction, "fast@1")
    assert await counts(knowledge_graph) == before
    assert before == {"entities": 4, "episodes": 1, "facts": 3, "mentions": 4}
    assert (first.episode_uuid, first.nodes, first.edges) == (
        second.episode_uuid,
        second.nodes,
        second.edges,
    )
    again = await cypher(
        knowledge_graph, "MATCH ()-[e:RELATES_TO]->() RETURN e.uuid AS u, e.created_at AS c"
    )
    assert sorted(map(str, again), key=str) == sorted(map(str, created), key=str)
    promised = await facts_named(knowledge_graph, "Priya promised: I'll call mom")
    assert len(promised) == 1


@pytest.mark.platform
async def test_rewrite_replaces_the_sessions_own_output(knowledge_graph: KnowledgeGraph) -> None:
    ep = episode("s1", T1, [("Asha", "My friend Ravi and my wife Priya.")])
    await knowledge_graph.write_extraction(
        ep,
        Extraction(
            [person("Ravi"), person("Priya")],
            [rel("Asha", "friend", "Ravi", "s1-0"), rel("Asha", "spouse", "Priya", "s1-0")],
        ),
        "fast@1",
    )
    # a new extractor version no longer finds Ravi
    await knowledge_graph.write_extraction(
        ep, Extraction([person("Priya")], [rel("Asha", "spouse", "Priya", "s1-0")]), "fast@2"
    )
    assert await knowledge_graph.find_entity_nodes("Ravi") == []
    assert await counts(knowledge_graph) == {
        "entities": 2,
        "episodes": 1,
        "facts": 1,
        "mentions": 2,
    }


@pytest.mark.platform
async def test_same_person_in_two_sessions_is_one_node(knowledge_graph: KnowledgeGraph) -> None:
    await knowledge_graph.write_extraction(
        episode("s1", T1, [("Asha", "Priya called.")]), Extraction([person("Priya", "s1-0")]), "f@1"
    )
    await knowledge_graph.write_extraction(
        episode("s2", T2, [("Asha", "PRIYA  is here.")]),
        Extraction([person("PRIYA ", "s2-0")], [rel("Asha", "spouse", "priya", "s2-0")]),
        "f@1",
    )
    nodes = await knowledge_graph.find_entity_nodes("priya")
    assert [n.name for n in nodes] == ["Priya"]  # one node, first spelling kept
    mentions = await cypher(
        knowledge_graph,
        "MATCH (ep:Episodic)-[:MENTIONS]->(n:Entity {uuid: $uuid}) RETURN ep.name AS name",
        uuid=nodes[0].uuid,
    )
    assert sorted(r["name"] for r in mentions) == ["session-s1", "session-s2"]
    # the speaker named in a relation is a person node too, and the same across sessions
    assert len(await knowledge_graph.find_entity_nodes("asha", type="person")) == 1


@pytest.mark.platform
async def test_newer_fact_supersedes_older_between_the_same_nodes_only(
    knowledge_graph: KnowledgeGraph,
) -> None:
    s1 = episode("s1", T1, [("Asha", "I like coffee."), ("Bob", "I like coffee too.")])
    first = await knowledge_graph.write_extraction(
        s1,
        Extraction(
            [], [rel("Asha", "likes", "coffee", "s1-0"), rel("Bob", "likes", "coffee", "s1-1")]
        ),
        "f@1",
    )
    assert first.invalidated == []
    s2 = episode("s2", T2, [("Asha", "I avoid coffee now.")])
    second = await knowledge_graph.write_extraction(
        s2, Extraction([], [rel("Asha", "avoids", "coffee", "s2-0")]), "f@1"
    )
    [ended] = second.invalidated
    assert (ended.fact, ended.predicate, ended.subject, ended.object) == (
        "Asha likes coffee",
        "LIKES",
        "Asha",
        "coffee",
    )
    assert ended.invalid_at == T2 and ended.session_id == "s1" and ended.segment_id == "s1-0"
    assert ended.invalidated_by_session == "s2"
    [avoids] = await facts_named(knowledge_graph, "Asha avoids coffee")
    assert ended.invalidated_by == avoids["uuid"]
    stored = await edge(knowledge_graph, ended.fact_uuid)
    assert stored["invalid_at"] == T2.isoformat() and stored["expired_at"] is not None
    assert stored["invalidated_by"] == avoids["uuid"]
    # nothing deleted; Bob's fact (other nodes) untouched
    assert (await counts(knowledge_graph))["facts"] == 3
    [bob] = await facts_named(knowledge_graph, "Bob likes coffee")
    assert bob["invalid_at"] is None
    assert avoids["invalid_at"] is None


@pytest.mark.platform
async def test_older_fact_arriving_late_is_written_already_invalidated(
    knowledge_graph: KnowledgeGraph,
) -> None:
    await knowledge_graph.write_extraction(
        episode("s2", T2, [("Asha", "I avoid coffee.")]),
        Extraction([], [rel("Asha", "avoids", "coffee", "s2-0")]),
        "f@1",
    )
    late = await knowledge_graph.write_extraction(
        episode("s1", T1, [("Asha", "I like coffee.")]),
        Extraction([], [rel("Asha", "likes", "coffee", "s1-0")]),
        "f@1",
    )
    [ended] = late.invalidated
    assert ended.fact == "Asha likes coffee" and ended.invalid_at == T2
    assert ended.session_id == "s1" and ended.invalidated_by_session == "s2"
    [avoids] = await facts_named(knowledge_graph, "Asha avoids coffee")
    assert avoids["invalid_at"] is None


@pytest.mark.platform
async def test_symmetric_relations_match_either_direction(knowledge_graph: KnowledgeGraph) -> None:
    await knowledge_graph.write_extraction(
        episode("s1", T1, [("Asha", "My husband Ravi.")]),
        Extraction([], [rel("Asha", "spouse", "Ravi", "s1-0")]),
        "f@1",
    )
    write = await knowledge_graph.write_extraction(
        episode("s2", T3, [("Ravi", "Asha is my ex-wife now.")]),
        Extraction([], [rel("Ravi", "ex spouse", "Asha", "s2-0")]),
        "f@1",
    )
    assert [f.fact for f in write.invalidated] == ["Asha's spouse is Ravi"]
    assert write.invalidated[0].invalid_at == T3


@pytest.mark.platform
async def test_restating_a_fact_does_not_invalidate_it(knowledge_graph: KnowledgeGraph) -> None:
    for sid, when, predicate in (("s1", T1, "likes"), ("s2", T2, "loves"), ("s3", T3, "likes")):
        write = await knowledge_graph.write_extraction(
            episode(sid, when, [("Asha", "coffee!")]),
            Extraction([], [rel("Asha", predicate, "coffee", f"{sid}-0")]),
            "f@1",
        )
        assert write.invalidated == []


@pytest.mark.platform
async def test_removing_the_newer_fact_reinstates_the_older(
    knowledge_graph: KnowledgeGraph,
) -> None:
    await knowledge_graph.write_extraction(
        episode("s1", T1, [("Asha", "I like coffee.")]),
        Extraction([], [rel("Asha", "likes", "coffee", "s1-0")]),
        "f@1",
    )
    s2 = episode("s2", T2, [("Asha", "I avoid coffee.")])
    write = await knowledge_graph.write_extraction(
        s2, Extraction([], [rel("Asha", "avoids", "coffee", "s2-0")]), "f@1"
    )
    ended = write.invalidated[0].fact_uuid
    # re-extraction of s2 finds no such relation: the older fact is valid again
    again = await knowledge_graph.write_extraction(s2, Extraction(), "f@2")
    assert again.reinstated == [ended]
    stored = await edge(knowledge_graph, ended)
    assert stored["invalid_at"] is None and stored["invalidated_by"] is None
    assert await facts_named(knowledge_graph, "Asha avoids coffee") == []


@pytest.mark.platform
async def test_forget_session(knowledge_graph: KnowledgeGraph) -> None:
    await knowledge_graph.write_extraction(
        episode("s1", T1, [("Asha", "My wife Priya likes coffee.")]),
        Extraction([person("Priya")], [rel("Priya", "likes", "coffee", "s1-0")]),
        "f@1",
    )
    await knowledge_graph.write_extraction(
        episode("s2", T2, [("Asha", "Priya avoids coffee. My friend Ravi.")]),
        Extraction(
            [person("Priya"), person("Ravi")],
            [rel("Priya", "avoids", "coffee", "s2-0"), rel("Asha", "friend", "Ravi", "s2-0")],
        ),
        "f@1",
    )
    # Ravi is in a community: membership is derived from him, it must not keep him alive.
    await cypher(
        knowledge_graph,
        "MATCH (n:Entity {name: 'Ravi'}) CREATE (:Community {uuid: 'c1'})-[:HAS_MEMBER]->(n)",
    )
    forgotten = await knowledge_graph.forget_session("s2")
    assert len(forgotten.reinstated) == 1
    assert await knowledge_graph.find_entity_nodes("Ravi") == []  # only s2 mentioned Ravi
    assert len(await knowledge_graph.find_entity_nodes("Priya")) == 1  # s1 still does
    assert await counts(knowledge_graph) == {
        "entities": 2,
        "episodes": 1,
        "facts": 1,
        "mentions": 2,
    }


@pytest.mark.platform
async def test_pronouns_are_not_nodes_and_speakers_link_commitments(
    knowledge_graph: KnowledgeGraph,
) -> None:
    ep = episode("s1", T1, [("Asha", "Her brother Arjun visits. I decided to move.")])
    extraction = Extraction(
        [
            person("Arjun", "s1-0"),
            ExtractedEntity("decision", "I decided to move", 0.85, segment_id="s1-0"),
        ],
        [rel("her", "sibling", "Arjun", "s1-0")],
    )
    write = await knowledge_graph.write_extraction(ep, extraction, "f@1")
    assert await knowledge_graph.find_entity_nodes("her") == []
    assert write.edges == 1  # the decision, linked from its segment's speaker
    [decided] = await facts_named(knowledge_graph, "Asha decided: I decided to move")
    assert decided["invalid_at"] is None
    [node] = await knowledge_graph.find_entity_nodes("I decided to move", type="decision")
    assert node.labels == ["Decision"]


@pytest.mark.platform
async def test_sensitivity_keeps_the_most_sensitive(knowledge_graph: KnowledgeGraph) -> None:
    sensitive = ExtractedEntity("person", "Dr Rao", 0.9, sensitivity="sensitive")
    await knowledge_graph.write_extraction(
        episode("s1", T1, [("Asha", "Dr Rao")]), Extraction([sensitive]), "f@1"
    )
    await knowledge_graph.write_extraction(
        episode("s2", T2, [("Asha", "Dr Rao")]), Extraction([person("Dr Rao")]), "f@1"
    )
    [node] = await knowledge_graph.find_entity_nodes("dr rao")
    assert node.attributes["sensitivity"] == "sensitive"


def test_said_at_the_same_moment_the_off_fact_wins() -> None:
    # "I love coffee but it gives me headaches": whatever the uuids or write order
    for created in ((1, 5), (5, 1)):
        verdicts = resolve_timeline(
            [tf("zz-like", "LIKES", 1, created=created[0]), tf("aa-avoid", "AVOIDS", 1,
                                                                created=created[1])]
        )  # fmt: skip
        assert verdicts["zz-like"].invalidated_by == "aa-avoid"
        assert verdicts["aa-avoid"].invalid_at is None


def test_a_diarization_label_is_someone_else_in_every_session() -> None:
    from context_engine.graph.writer import plan_session

    t0 = datetime(2026, 3, 1, tzinfo=UTC)
    plans = [
        plan_session(
            "g",
            episode(sid, t0, [("SPEAKER_00", "I live in Pune."), ("Ravi", "Nice.")]),
            Extraction(
                relations=[
                    rel("SPEAKER_00", "lives_in", "Pune", f"{sid}-0"),
                    rel("Ravi", "lives_in", "Pune", f"{sid}-1"),
                ]
            ),
        )
        for sid in ("s1", "s2")
    ]
    sources = [{e.source.name: e.source.uuid for e in plan.edges.values()} for plan in plans]
    # one node per session for the label (a fact of one never ends another's), while a
    # named person is one node across sessions
    assert sources[0]["SPEAKER_00"] != sources[1]["SPEAKER_00"]
    assert sources[0]["Ravi"] == sources[1]["Ravi"]


def test_valid_from_is_read_as_utc_or_not_at_all() -> None:
    from datetime import date

    from context_engine.graph.writer import parse_valid_from

    midnight = datetime(2026, 5, 5, tzinfo=UTC)
    assert parse_valid_from("2026-05-05") == midnight
    assert parse_valid_from(" 2026-05-05 ") == midnight
    assert parse_valid_from(date(2026, 5, 5)) == midnight
    assert parse_valid_from("2026-05-05T10:30:00") == midnight + timedelta(hours=10, minutes=30)
    assert parse_valid_from("2026-05-05T10:30:00+05:30") == midnight + timedelta(hours=5)
    for unreadable in ("last week", "", "   ", None, 12):
        assert parse_valid_from(unreadable) is None
