"""Community detection (communities.py) on a real, migrated PostgreSQL and a real FalkorDB:
clusters of co-mentioned and related entities, the minimum size, as_of, stable ids,
idempotency, graphiti Community nodes with HAS_MEMBER edges, and a failing graph."""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import networkx as nx
import pytest
from falkordb_harness import cypher, episode
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from context_engine.config import Settings
from context_engine.extract.base import Extraction
from context_engine.extract.schema import ExtractedEntity, ExtractedRelation
from context_engine.graph import KnowledgeGraph
from context_engine.graph.base import GraphUnavailableError
from context_engine.knowledge import entity_store
from context_engine.memory.communities import (
    detect_communities,
    find_communities,
    load_entity_graph,
    match_communities,
)

pytest_plugins = ["falkordb_harness"]

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
LATER = T0 + timedelta(days=30)
FAMILY = ["Priya", "Ravi", "Meera", "Arjun"]
WORK = ["Kabir", "Leela", "Sanjay"]


async def converse(
    db: AsyncEngine,
    sid: str,
    start: datetime,
    segments: Sequence[Sequence[str]],
    relations: Sequence[ExtractedRelation] = (),
    graph: KnowledgeGraph | None = None,
) -> None:
    """A session whose segment i mentions the people segments[i] (stored as the extractor
    stores them; also written to the graph when given)."""
    lines = [("Asha", " and ".join(names) or "hm") for names in segments]
    async with db.begin() as conn:
        await conn.execute(
            text("INSERT INTO sessions (session_id, device_id, started_at) VALUES (:s, 'd', :t)"),
            {"s": sid, "t": start},
        )
        for i, (speaker, said) in enumerate(lines):
            await conn.execute(
                text(
                    "INSERT INTO segments (session_id, segment_id, speaker, text, start_s, end_s,"
                    " spoken_at, stt_engine, source_offset)"
                    " VALUES (:s, :g, :who, :x, :a, :b, :at, 'test', 0)"
                ),
                {
                    "s": sid, "g": f"{sid}-{i}", "who": speaker, "x": said, "a": i * 10.0,
                    "b": i * 10.0 + 5, "at": start + timedelta(seconds=i * 10),
                },
            )  # fmt: skip
    extraction = Extraction(
        [
            ExtractedEntity("person", name, 0.9, evidence=name, segment_id=f"{sid}-{i}")
            for i, names in enumerate(segments)
            for name in names
        ],
        list(relations),
    )
    async with db.begin() as conn:
        session = await entity_store.load_session_text(conn, sid)
        assert session is not None
        await entity_store.store_extraction(
            conn, session, extraction, extractor="fast", version=1,
            fingerprint=f"fp-{sid}", started_at=start,
        )  # fmt: skip
    if graph is not None:
        await graph.write_extraction(episode(sid, start, lines), extraction, "fast@1")


async def clique(db: AsyncEngine, prefix: str, names: Sequence[str], start: datetime = T0,
                 sessions: int = 3, graph: KnowledgeGraph | None = None) -> None:  # fmt: skip
    """`names` all mentioned together in one segment of each of `sessions` sessions."""
    for n in range(sessions):
        await converse(db, f"{prefix}{n}", start + timedelta(hours=n), [names], graph=graph)


async def query(db: AsyncEngine, sql: str, **params: Any) -> list[dict[str, Any]]:
    async with db.connect() as conn:
        return [dict(r._mapping) for r in await conn.execute(text(sql), params)]


async def membership(db: AsyncEngine) -> dict[str, int | None]:
    """Entity name → community id."""
    rows = await query(db, "SELECT name, community_id FROM entities")
    return {r["name"]: r["community_id"] for r in rows}


def groups(members: dict[str, int | None]) -> set[frozenset[str]]:
    """The communities as sets of names."""
    by: dict[int, set[str]] = {}
    for name, cid in members.items():
        if cid is not None:
            by.setdefault(cid, set()).add(name)
    return {frozenset(v) for v in by.values()}


async def test_separate_clusters_become_separate_communities(
    db: AsyncEngine, settings: Settings
) -> None:
    await clique(db, "fam", FAMILY)
    await clique(db, "work", WORK)
    await clique(db, "duo", ["Nila", "Omar"])  # two people only: below the minimum of 3
    # Priya is mentioned most: she leads the family community's name
    await converse(db, "solo", T0, [["Priya"]])

    outcome = await detect_communities(db, settings, as_of=LATER)

    assert (outcome.communities, outcome.members, outcome.created) == (2, 7, 2)
    assert (outcome.kept, outcome.removed, outcome.graph_error) == (0, 0, None)
    members = await membership(db)
    assert groups(members) == {frozenset(FAMILY), frozenset(WORK)}
    assert members["Nila"] is None and members["Omar"] is None
    rows = await query(db, "SELECT id, uuid, name, size FROM communities ORDER BY size DESC")
    assert [r["size"] for r in rows] == [4, 3]
    assert rows[0]["name"].split(" · ")[0] == "Priya" and rows[0]["name"].count(" · ") == 2
    assert rows[0]["id"] == members["Priya"] and rows[1]["id"] == members["Kabir"]
    assert len({r["uuid"] for r in rows}) == 2


async def test_community_below_min_size_is_removed_and_members_cleared(
    db: AsyncEngine, settings: Settings
) -> None:
    await clique(db, "work", WORK)
    first = await detect_communities(db, settings, as_of=LATER)
    assert first.communities == 1 and set(groups(await membership(db))) == {frozenset(WORK)}

    stricter = settings.model_copy(update={"community_min_size": 4})
    second = await detect_communities(db, stricter, as_of=LATER)

    assert (second.communities, second.members, second.removed) == (0, 0, 1)
    assert second.reassigned == 3
    assert set((await membership(db)).values()) == {None}
    assert await query(db, "SELECT id FROM communities") == []


async def test_relations_join_entities(db: AsyncEngine, settings: Settings) -> None:
    # Each mentioned on their own: only the relations (names in any case) connect them.
    await converse(db, "s1", T0, [["Zoya"], ["Yash"], ["Xavier"]], relations=[
        ExtractedRelation("zoya", "spouse", "YASH", 0.9, segment_id="s1-0"),
        ExtractedRelation("Yash", "sibling", "  Xavier ", 0.9, segment_id="s1-1"),
        ExtractedRelation("I", "likes", "Zoya", 0.9, segment_id="s1-2"),  # no such entity
    ])  # fmt: skip
    await converse(db, "s2", T0 + timedelta(hours=1), [["Wanda"]])

    outcome = await detect_communities(db, settings, as_of=LATER)

    assert outcome.communities == 1
    members = await membership(db)
    assert groups(members) == {frozenset({"Zoya", "Yash", "Xavier"})}
    assert members["Wanda"] is None


async def test_relations_said_after_as_of_do_not_count(db: AsyncEngine, settings: Settings) -> None:
    await converse(db, "s1", T0, [["Zoya"], ["Yash"], ["Xavier"]])
    await converse(db, "s2", LATER, [["Zoya"]], relations=[
        ExtractedRelation("Zoya", "spouse", "Yash", 0.9, segment_id="s2-0"),
        ExtractedRelation("Yash", "sibling", "Xavier", 0.9, segment_id="s2-0"),
    ])  # fmt: skip

    before = await detect_communities(db, settings, as_of=LATER - timedelta(days=1))
    after = await detect_communities(db, settings, as_of=LATER + timedelta(days=1))

    assert before.communities == 0 and after.communities == 1


async def test_rerun_is_deterministic_and_idempotent(db: AsyncEngine, settings: Settings) -> None:
    # A messier graph than two cliques: random co-mentions among 40 people.
    rng = random.Random(3)
    people = [f"P{i:02d}" for i in range(40)]
    for s in range(30):
        segments = [rng.sample(people, rng.randint(2, 5)) for _ in range(3)]
        await converse(db, f"r{s}", T0 + timedelta(minutes=s), segments)

    graph = await load_entity_graph(db, LATER)
    once = find_communities(graph, resolution=1.0, seed=7, min_size=3)
    again = find_communities(await load_entity_graph(db, LATER), resolution=1.0, seed=7, min_size=3)
    assert once == again and len(once) >= 2

    first = await detect_communities(db, settings, as_of=LATER)
    rows_before = await query(db, "SELECT * FROM communities ORDER BY id")
    members_before = await membership(db)
    second = await detect_communities(db, settings, as_of=LATER)

    assert first.created == first.communities == len(once)
    assert (second.created, second.removed, second.reassigned) == (0, 0, 0)
    assert second.kept == second.communities == first.communities
    assert await query(db, "SELECT * FROM communities ORDER BY id") == rows_before
    assert await membership(db) == members_before


async def test_ids_stay_when_a_member_joins(db: AsyncEngine, settings: Settings) -> None:
    await clique(db, "fam", FAMILY)
    await clique(db, "work", WORK)
    await detect_communities(db, settings, as_of=LATER)
    before = {r["name"]: r for r in await query(db, "SELECT * FROM communities")}
    old_members = await membership(db)

    await clique(db, "more", [*FAMILY, "Dev"], start=T0 + timedelta(days=1))
    outcome = await detect_communities(db, settings, as_of=LATER)

    assert (outcome.created, outcome.kept, outcome.removed, outcome.reassigned) == (0, 2, 0, 1)
    members = await membership(db)
    assert members["Dev"] == members["Priya"] == old_members["Priya"]
    after = await query(db, "SELECT id, uuid, size FROM communities WHERE id = :i",
                        i=members["Priya"])  # fmt: skip
    old = next(r for r in before.values() if r["id"] == old_members["Priya"])
    assert after == [{"id": old["id"], "uuid": old["uuid"], "size": 5}]


def test_matching_needs_more_than_half_overlap() -> None:
    old_of = {1: 10, 2: 10, 3: 10, 4: 10, 5: 20, 6: 20, 7: 20}
    sizes = {10: 4, 20: 3}
    # {1,2,3}: 3/4 of 10 → kept; {5,8,9,11}: 1/6 of 20 → new; {6,7,12}: 2/4 = 0.5 → new
    assert match_communities([[1, 2, 3], [5, 8, 9, 11], [6, 7, 12]], old_of, sizes) == [
        10, None, None,
    ]  # fmt: skip
    assert match_communities([[5, 6, 7, 1]], old_of, sizes) == [20]


async def test_entities_first_seen_after_as_of_are_ignored(
    db: AsyncEngine, settings: Settings
) -> None:
    await clique(db, "fam", FAMILY[:3])
    # Arjun is first mentioned a month later, together with the others
    await clique(db, "late", FAMILY, start=LATER)

    early = await detect_communities(db, settings, as_of=LATER - timedelta(days=1))
    members = await membership(db)
    assert early.members == 3 and members["Arjun"] is None
    assert groups(members) == {frozenset(FAMILY[:3])}

    late = await detect_communities(db, settings, as_of=LATER + timedelta(days=1))
    assert late.members == 4 and late.kept == 1
    assert groups(await membership(db)) == {frozenset(FAMILY)}


async def test_crowded_segments_add_no_pairs(db: AsyncEngine, settings: Settings) -> None:
    crowd = [f"Guest {i}" for i in range(31)]  # a list read out, not a conversation
    await converse(db, "party", T0, [crowd])

    outcome = await detect_communities(db, settings, as_of=LATER)

    assert outcome.communities == 0
    assert (await load_entity_graph(db, LATER)).number_of_edges() == 0


# --- the graph ----------------------------------------------------------------------------


async def graph_communities(graph: KnowledgeGraph) -> dict[str, dict[str, Any]]:
    """Community uuid → name, group_id, summary, member names (from HAS_MEMBER edges)."""
    rows = await cypher(
        graph,
        "MATCH (c:Community) OPTIONAL MATCH (c)-[:HAS_MEMBER]->(n:Entity) "
        "RETURN c.uuid AS uuid, c.name AS name, c.group_id AS group_id, c.summary AS summary, "
        "c.name_embedding IS NOT NULL AS embedded, collect(n.name) AS members",
    )
    return {str(r["uuid"]): r for r in rows}


async def test_graph_gets_community_nodes_and_members(
    db: AsyncEngine, graph_settings: Settings, db_url: str, knowledge_graph: KnowledgeGraph
) -> None:
    settings = graph_settings.model_copy(update={"database_url": db_url})
    for n in range(3):
        await converse(db, f"fam{n}", T0 + timedelta(hours=n), [FAMILY], graph=knowledge_graph)
        await converse(db, f"work{n}", T0 + timedelta(hours=n, minutes=30), [WORK],
                       graph=knowledge_graph)  # fmt: skip

    outcome = await detect_communities(db, settings, as_of=LATER, graph=knowledge_graph)

    assert outcome.graph_error is None and outcome.communities == 2
    rows = {r["uuid"]: r for r in await query(db, "SELECT uuid, name FROM communities")}
    found = await graph_communities(knowledge_graph)
    assert found.keys() == rows.keys()
    assert {frozenset(c["members"]) for c in found.values()} == {
        frozenset(FAMILY), frozenset(WORK),
    }  # fmt: skip
    for uuid, c in found.items():
        assert c["name"] == rows[uuid]["name"] and c["group_id"] == settings.graph_group_id
        assert c["embedded"] and set(c["summary"].split(", ")) == set(c["members"])
    edges = await cypher(knowledge_graph, "MATCH (:Community)-[e:HAS_MEMBER]->(:Entity) "
                                          "RETURN e.group_id AS g, e.uuid AS u")  # fmt: skip
    assert len(edges) == 7 and {e["g"] for e in edges} == {settings.graph_group_id}

    # Again: nothing changes. Then Dev joins the family and the work community goes.
    await detect_communities(db, settings, as_of=LATER, graph=knowledge_graph)
    again = await cypher(knowledge_graph, "MATCH (:Community)-[e:HAS_MEMBER]->(:Entity) "
                                          "RETURN e.group_id AS g, e.uuid AS u")  # fmt: skip
    assert sorted(map(str, again)) == sorted(map(str, edges))
    await converse(db, "more", T0 + timedelta(days=1), [[*FAMILY, "Dev"]], graph=knowledge_graph)
    stricter = settings.model_copy(update={"community_min_size": 4})
    later = await detect_communities(db, stricter, as_of=LATER, graph=knowledge_graph)

    assert (later.graph_error, later.communities, later.removed) == (None, 1, 1)
    family_uuid = next(u for u, c in found.items() if "Priya" in c["members"])
    now = await graph_communities(knowledge_graph)
    assert list(now) == [family_uuid]
    assert set(now[family_uuid]["members"]) == {*FAMILY, "Dev"}
    edges = await cypher(knowledge_graph, "MATCH ()-[e:HAS_MEMBER]->() RETURN count(e) AS n")
    assert edges[0]["n"] == 5

    # As of before Dev was mentioned: the family community stays, his membership edge goes.
    before_dev = await detect_communities(
        db, stricter, as_of=T0 + timedelta(hours=12), graph=knowledge_graph
    )
    assert (before_dev.graph_error, before_dev.kept, before_dev.reassigned) == (None, 1, 1)
    now = await graph_communities(knowledge_graph)
    assert list(now) == [family_uuid] and set(now[family_uuid]["members"]) == set(FAMILY)
    edges = await cypher(knowledge_graph, "MATCH ()-[e:HAS_MEMBER]->() RETURN count(e) AS n")
    assert edges[0]["n"] == 4


class UnreachableGraphDouble:
    """Test double for a KnowledgeGraph whose database stopped answering."""

    @property
    def graphiti(self) -> Any:
        raise GraphUnavailableError("graph database unavailable: connection refused")


async def test_graph_failure_keeps_postgres_result(db: AsyncEngine, settings: Settings) -> None:
    await clique(db, "fam", FAMILY)

    outcome = await detect_communities(
        db,
        settings,
        as_of=LATER,
        graph=UnreachableGraphDouble(),  # type: ignore[arg-type]
    )

    assert outcome.graph_error is not None and "connection refused" in outcome.graph_error
    assert outcome.communities == 1
    assert groups(await membership(db)) == {frozenset(FAMILY)}


async def test_graph_that_could_not_open_reports_graph_error(
    db: AsyncEngine, settings: Settings
) -> None:
    await clique(db, "fam", FAMILY)
    dead = settings.model_copy(
        update={"graph_backend": "falkordb", "graph_url": "redis://127.0.0.1:9"}
    )

    outcome = await detect_communities(db, dead, as_of=LATER, graph=KnowledgeGraph(dead))

    assert outcome.graph_error is not None and outcome.communities == 1
    assert groups(await membership(db)) == {frozenset(FAMILY)}


def test_the_gpu_path_says_what_it_needs_when_nx_cugraph_is_missing() -> None:
    graph = nx.Graph()
    graph.add_edge(1, 2, weight=1)
    if "cugraph" in nx.utils.backends.backends:
        pytest.skip("nx-cugraph is installed here")
    with pytest.raises(RuntimeError, match="CONTEXT_ENGINE_COMMUNITY_BACKEND=cugraph"):
        find_communities(graph, resolution=1.0, seed=7, min_size=2, backend="cugraph")
