"""graphiti's community model in the graph: a `Community` node per community (uuid = the
PostgreSQL community's uuid) with `HAS_MEMBER` edges to its members' `Entity` nodes, written in
batched UNWIND queries (graphiti's own per-node save where the backend's vector procedures
differ). memory/communities.py detects the communities and calls `write_graph_communities`."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from context_engine.graph import facts as vocab
from context_engine.graph.driver import run

if TYPE_CHECKING:
    from graphiti_core.driver.driver import GraphDriver

    from context_engine.graph.knowledge import KnowledgeGraph

_GRAPH_BATCH = 1_000
_EMBED_BATCH = 256


@dataclass(slots=True, frozen=True)
class Member:
    id: int
    type: str
    name: str
    canonical_name: str
    episode_count: int


@dataclass(slots=True)
class StoredCommunity:
    id: int
    uuid: str
    name: str
    created_at: datetime
    members: list[Member] = field(default_factory=list)


# graphiti's FalkorDB CommunityNode save query (get_community_node_save_query), UNWINDed.
_FALKOR_SAVE_NODES = """
UNWIND $nodes AS n
MERGE (c:Community {uuid: n.uuid})
SET c = {uuid: n.uuid, name: n.name, group_id: n.group_id, summary: n.summary,
         created_at: n.created_at, name_embedding: vecf32(n.name_embedding)}
"""
# graphiti's CommunityEdge save query, UNWINDed (plain Cypher: FalkorDB and Neo4j alike).
_SAVE_EDGES = """
UNWIND $edges AS r
MATCH (c:Community {uuid: r.source_node_uuid})
MATCH (n:Entity {uuid: r.target_node_uuid})
MERGE (c)-[e:HAS_MEMBER {uuid: r.uuid}]->(n)
SET e = {uuid: r.uuid, group_id: r.group_id, created_at: r.created_at}
"""


def _batches(items: Sequence[Any], size: int = _GRAPH_BATCH) -> list[Sequence[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def membership_uuid(community_uuid: str, node_uuid: str) -> str:
    """One HAS_MEMBER edge per (community, entity node): re-running never duplicates."""
    return str(uuid.uuid5(uuid.UUID(community_uuid), node_uuid))


async def _member_nodes(
    driver: GraphDriver, group_id: str, members: Sequence[Member]
) -> dict[int, list[str]]:
    """Entity node uuids of each member: the graph writer's node (uuid of group, type and
    canonical name), else nodes of that name and label (written by graphiti's LLM path)."""
    wanted = {m.id: vocab.node_uuid(group_id, m.type, m.canonical_name) for m in members}
    found: set[str] = set()
    for chunk in _batches(list(wanted.values())):
        rows = await run(
            driver,
            "UNWIND $uuids AS u MATCH (n:Entity {uuid: u}) WHERE n.group_id = $group_id "
            "RETURN n.uuid AS uuid",
            uuids=list(chunk),
            group_id=group_id,
        )
        found.update(r["uuid"] for r in rows)
    nodes = {i: [u] for i, u in wanted.items() if u in found}
    missing = [
        {"id": m.id, "name": m.name, "label": vocab.label_of(m.type)}
        for m in members
        if m.id not in nodes
    ]
    for chunk in _batches(missing):
        for r in await run(
            driver,
            "UNWIND $rows AS r MATCH (n:Entity {name: r.name}) "
            "WHERE n.group_id = $group_id AND r.label IN labels(n) "
            "RETURN r.id AS id, n.uuid AS uuid ORDER BY uuid",
            rows=list(chunk),
            group_id=group_id,
        ):
            nodes.setdefault(int(r["id"]), []).append(r["uuid"])
    return nodes


async def write_graph_communities(
    graph: KnowledgeGraph,
    group_id: str,
    communities: Sequence[StoredCommunity],
    summarise: Callable[[Sequence[Member]], str],
) -> dict[str, int]:
    """Make the group's Community nodes and HAS_MEMBER edges match `communities` (each node's
    summary from `summarise(members)`). Ordered so that a write stopped half-way is completed
    by running it again: nodes, new edges, stale edges, stale nodes. Returns what it wrote and
    removed."""
    graphiti = graph.graphiti  # raises when the graph is not open
    driver = graphiti.driver
    existing = {
        r["uuid"]: r
        for r in await run(
            driver,
            "MATCH (c:Community) WHERE c.group_id = $group_id RETURN c.uuid AS uuid, "
            "c.name AS name, c.summary AS summary, c.name_embedding IS NOT NULL AS embedded",
            group_id=group_id,
        )
    }
    saved = await _save_nodes(graphiti, group_id, communities, existing, summarise)
    node_of = await _member_nodes(driver, group_id, [m for c in communities for m in c.members])
    added, present, wanted = await _add_edges(driver, group_id, communities, node_of)
    stale_nodes = sorted(existing.keys() - {c.uuid for c in communities})
    stale_edges = await _remove_stale(driver, present, wanted, stale_nodes)
    return {
        "nodes_saved": saved,
        "nodes_removed": len(stale_nodes),
        "edges_added": added,
        "edges_removed": stale_edges,
        "members_without_node": sum(1 for c in communities for m in c.members
                                    if m.id not in node_of),
    }  # fmt: skip


async def _save_nodes(
    graphiti: Any,
    group_id: str,
    communities: Sequence[StoredCommunity],
    existing: dict[str, Any],
    summarise: Callable[[Sequence[Member]], str],
) -> int:
    """New or renamed Community nodes, re-embedded (graphiti's full save); summary-only
    changes set in place. Returns how many nodes were saved."""
    from graphiti_core.driver.driver import GraphProvider
    from graphiti_core.helpers import semaphore_gather
    from graphiti_core.nodes import CommunityNode

    driver = graphiti.driver
    to_save: list[tuple[StoredCommunity, str]] = []
    resummarised: list[dict[str, str]] = []
    for c in communities:
        summary = summarise(c.members)
        old = existing.get(c.uuid)
        if old is None or old["name"] != c.name or not old["embedded"]:
            to_save.append((c, summary))
        elif old["summary"] != summary:
            resummarised.append({"uuid": c.uuid, "summary": summary})
    vectors: list[list[float]] = []
    for chunk in _batches([c.name for c, _ in to_save], _EMBED_BATCH):
        vectors += await graphiti.embedder.create_batch(list(chunk))
    nodes = [
        CommunityNode(
            uuid=c.uuid,
            name=c.name,
            group_id=group_id,
            labels=["Community"],
            created_at=c.created_at,
            summary=summary,
            name_embedding=vector,
        )
        for (c, summary), vector in zip(to_save, vectors, strict=True)
    ]
    if driver.provider == GraphProvider.FALKORDB:
        for chunk in _batches(nodes):
            rows = [
                n.model_dump(
                    include={"uuid", "name", "group_id", "summary", "created_at", "name_embedding"}
                )
                for n in chunk
            ]
            await run(driver, _FALKOR_SAVE_NODES, nodes=rows)
    else:  # graphiti's own per-node save (vector property procedures differ by backend)
        for chunk in _batches(nodes, 50):
            await semaphore_gather(*(n.save(driver) for n in chunk))
    for chunk in _batches(resummarised):
        await run(
            driver,
            "UNWIND $rows AS r MATCH (c:Community {uuid: r.uuid}) SET c.summary = r.summary",
            rows=list(chunk),
        )
    return len(nodes)


async def _add_edges(
    driver: GraphDriver,
    group_id: str,
    communities: Sequence[StoredCommunity],
    node_of: dict[int, list[str]],
) -> tuple[int, dict[str, str], set[str]]:
    """The wanted (community, member node) HAS_MEMBER edges that the graph lacks, written.
    Returns how many were added, the edges present before (uuid → community) and the uuids
    wanted."""
    from graphiti_core.edges import CommunityEdge

    now = datetime.now(UTC)
    wanted: dict[str, CommunityEdge] = {}
    for c in communities:
        for m in c.members:
            for node in node_of.get(m.id, ()):
                edge_uuid = membership_uuid(c.uuid, node)
                wanted[edge_uuid] = CommunityEdge(
                    uuid=edge_uuid,
                    group_id=group_id,
                    source_node_uuid=c.uuid,
                    target_node_uuid=node,
                    created_at=now,
                )
    present = {
        r["uuid"]: r["community"]
        for r in await run(
            driver,
            "MATCH (c:Community)-[e:HAS_MEMBER]->() WHERE c.group_id = $group_id "
            "RETURN e.uuid AS uuid, c.uuid AS community",
            group_id=group_id,
        )
    }
    new_edges = [e for u, e in wanted.items() if u not in present]
    for chunk in _batches(new_edges):
        rows = [
            e.model_dump(
                include={"uuid", "group_id", "source_node_uuid", "target_node_uuid", "created_at"}
            )
            for e in chunk
        ]
        await run(driver, _SAVE_EDGES, edges=rows)
    return len(new_edges), present, set(wanted)


async def _remove_stale(
    driver: GraphDriver, present: dict[str, str], wanted: set[str], stale_nodes: list[str]
) -> int:
    """Edges no longer wanted, then the communities gone (their edges go with them: DETACH
    DELETE). Returns how many edges were removed on their own."""
    gone = set(stale_nodes)
    stale_edges = sorted((c, e) for e, c in present.items() if e not in wanted and c not in gone)
    for chunk in _batches(stale_edges):
        # from the community node (indexed), not by edge uuid: FalkorDB would scan every edge
        await run(
            driver,
            "UNWIND $rows AS r MATCH (c:Community {uuid: r.c})-[e:HAS_MEMBER]->() "
            "WHERE e.uuid = r.e DELETE e",
            rows=[{"c": c, "e": e} for c, e in chunk],
        )
    for chunk in _batches(stale_nodes):
        await run(
            driver,
            "UNWIND $uuids AS u MATCH (c:Community {uuid: u}) DETACH DELETE c",
            uuids=list(chunk),
        )
    return len(stale_edges)
