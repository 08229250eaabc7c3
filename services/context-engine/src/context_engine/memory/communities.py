"""Community detection over the entity graph (issue 7): who and what belongs together.

1. The graph, from PostgreSQL as of `as_of`: two entities are joined by +1 for every segment
   that mentions both (current mentions, spoken by then) and +2 for every current extracted
   relation between them (its subject and object are names, resolved by canonical name).
   The pairs are generated and summed in SQL and streamed: Python only ever holds the summed
   edge list, never the mentions.
2. Louvain (networkx) with the configured resolution and seed: the same graph, built in the
   same order, gives the same communities. Communities smaller than `community_min_size`
   are dropped (their members have no community).
3. One transaction: each community keeps the id and uuid of the old community it overlaps
   most (Jaccard of the member sets > 0.5), otherwise it is new; members get
   entities.community_id, everyone else NULL, and communities left without members go.
   Running it again on the same data changes nothing.
4. With a graph (graph/communities.py): graphiti's own community model — a `Community` node
   per community (uuid = communities.uuid) with `HAS_MEMBER` edges to the members' `Entity`
   nodes — replaces the group's previous communities. The graph is written after PostgreSQL
   commits: a graph failure is logged and returned, never undoes the PostgreSQL result.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

import networkx as nx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from context_engine.graph import facts as vocab
from context_engine.graph.communities import Member, StoredCommunity, write_graph_communities
from her_os_shared.logging import get_logger

if TYPE_CHECKING:
    from context_engine.config import Settings
    from context_engine.graph.knowledge import KnowledgeGraph

log = get_logger(__name__)

# A segment naming more entities than this is a list (contacts read out, an agenda, a pasted
# document), not a conversation about them: its n² pairs (435 at 30) would swamp the real
# co-occurrence signal and blow up the pair count, so it contributes no pairs at all.
MAX_SEGMENT_ENTITIES = 30
CO_MENTION_WEIGHT = 1
RELATION_WEIGHT = 2  # someone said how the two are related: stronger than co-occurring
MATCH_JACCARD = 0.5  # above it a new community is the old one, drifted
NAME_MEMBERS = 3
SUMMARY_MEMBERS = 50
_STREAM_ROWS = 20_000
# Serialises concurrent detections (nightly run and POST /v1/consolidate): both read the old
# membership and rewrite it.
_LOCK_KEY = 0x6865_725F_636F_6D6D  # "her_comm"

# Weighted, undirected entity pairs (a < b). The CTEs keep everything set-based: PostgreSQL
# joins, counts and sums (spilling to disk past work_mem) and streams back only the edges.
_EDGES = text(
    """
    WITH mention AS (
        SELECT DISTINCT m.session_id, m.segment_id, m.entity_id
        FROM entity_mentions m
        JOIN entities e ON e.id = m.entity_id
        JOIN segments s ON s.session_id = m.session_id AND s.segment_id = m.segment_id
        WHERE m.current AND e.first_seen <= :as_of AND s.spoken_at <= :as_of
    ),
    counted AS (
        SELECT session_id, segment_id, entity_id,
               count(*) OVER (PARTITION BY session_id, segment_id) AS n
        FROM mention
    ),
    small AS (SELECT * FROM counted WHERE n BETWEEN 2 AND CAST(:cap AS int)),
    co AS (
        SELECT a.entity_id AS a, b.entity_id AS b, CAST(:co_weight AS int) AS w
        FROM small a
        JOIN small b ON b.session_id = a.session_id AND b.segment_id = a.segment_id
                    AND a.entity_id < b.entity_id
    ),
    -- one entity per canonical name (the most specific type first, as the graph writer
    -- resolves relation endpoints)
    named AS (
        SELECT DISTINCT ON (canonical_name) canonical_name, id
        FROM entities
        WHERE first_seen <= :as_of
        ORDER BY canonical_name, array_position(CAST(:types AS text[]), type) NULLS LAST, id
    ),
    rel AS (
        SELECT least(s.id, o.id) AS a, greatest(s.id, o.id) AS b, CAST(:rel_weight AS int) AS w
        FROM extracted_relations r
        JOIN sessions ss ON ss.session_id = r.session_id
        LEFT JOIN segments sg ON sg.session_id = r.session_id AND sg.segment_id = r.segment_id
        -- canonical_name in SQL (Python's casefold may differ for a few letters, e.g. ß)
        JOIN named s ON s.canonical_name = lower(btrim(regexp_replace(r.subject, '\\s+', ' ', 'g')))
        JOIN named o ON o.canonical_name = lower(btrim(regexp_replace(r.object, '\\s+', ' ', 'g')))
        WHERE r.current AND coalesce(sg.spoken_at, ss.started_at) <= :as_of AND s.id <> o.id
    )
    SELECT a, b, sum(w) AS weight
    FROM (SELECT a, b, w FROM co UNION ALL SELECT a, b, w FROM rel) pairs
    GROUP BY a, b
    ORDER BY a, b
    """
)


@dataclass(slots=True, frozen=True)
class CommunityOutcome:
    communities: int  # communities after the run
    members: int  # entities in one of them
    created: int
    kept: int  # matched to an existing community: same id and uuid
    removed: int
    reassigned: int  # entities whose community_id changed (NULL included)
    graph_error: str | None = None


# --- 1. the graph -------------------------------------------------------------------------


async def load_entity_graph(engine: AsyncEngine, as_of: datetime) -> nx.Graph:
    """The weighted entity graph as of `as_of`, nodes and edges in id order (Louvain's
    seeded shuffle depends on insertion order: same data, same graph, same result)."""
    graph = nx.Graph()
    params = {
        "as_of": as_of,
        "cap": MAX_SEGMENT_ENTITIES,
        "co_weight": CO_MENTION_WEIGHT,
        "rel_weight": RELATION_WEIGHT,
        "types": list(vocab.TYPE_PRIORITY),
    }
    async with engine.connect() as conn:
        result = await conn.stream(_EDGES, params)
        async for rows in result.partitions(_STREAM_ROWS):
            graph.add_weighted_edges_from((int(a), int(b), int(w)) for a, b, w in rows)
    return graph


# --- 2. communities -----------------------------------------------------------------------


def find_communities(
    graph: nx.Graph,
    *,
    resolution: float,
    seed: int,
    min_size: int,
    backend: Literal["networkx", "cugraph"] = "networkx",
) -> list[list[int]]:
    """Louvain communities of at least `min_size` members: each sorted, the list ordered by
    size (largest first), then smallest member id. `backend="cugraph"` lets networkx dispatch
    the same call to nx-cugraph on an NVIDIA GPU (an optional install)."""
    if graph.number_of_edges() == 0:
        return []
    extra: dict[str, Any] = {}
    if backend == "cugraph":
        if "cugraph" not in nx.utils.backends.backends:
            raise RuntimeError(
                "CONTEXT_ENGINE_COMMUNITY_BACKEND=cugraph needs the nx-cugraph package and an "
                "NVIDIA GPU (pip install nx-cugraph-cu12); unset it to use networkx on the CPU"
            )
        extra["backend"] = "cugraph"
    found = nx.community.louvain_communities(
        graph, weight="weight", resolution=resolution, seed=seed, **extra
    )
    kept = [sorted(c) for c in found if len(c) >= min_size]
    kept.sort(key=lambda members: (-len(members), members[0]))
    return kept


def match_communities(
    new: Sequence[Sequence[int]], old_of: dict[int, int], old_sizes: dict[int, int]
) -> list[int | None]:
    """For each new community, the old community id it continues (Jaccard > 0.5), or None.
    `old_of` maps entity id → old community id. Over 0.5 a new set holds more than half of
    the old one, so no two new (disjoint) sets can claim the same old community."""
    matched: list[int | None] = []
    taken: set[int] = set()
    for members in new:
        overlap = Counter(old_of[m] for m in members if m in old_of)
        best: int | None = None
        best_score = MATCH_JACCARD
        for old_id, inter in sorted(overlap.items()):
            score = inter / (len(members) + old_sizes[old_id] - inter)
            if score > best_score and old_id not in taken:
                best, best_score = old_id, score
        if best is not None:
            taken.add(best)
        matched.append(best)
    return matched


def community_name(members: Sequence[Member]) -> str:
    """The members mentioned in the most sessions, e.g. "Priya · Ravi · Pune"."""
    return " · ".join(m.name for m in _by_prominence(members)[:NAME_MEMBERS])


def community_summary(members: Sequence[Member]) -> str:
    ranked = _by_prominence(members)
    summary = ", ".join(m.name for m in ranked[:SUMMARY_MEMBERS])
    if len(ranked) > SUMMARY_MEMBERS:
        summary += f" and {len(ranked) - SUMMARY_MEMBERS} more"
    return summary


def _by_prominence(members: Sequence[Member]) -> list[Member]:
    return sorted(members, key=lambda m: (-m.episode_count, m.canonical_name, m.id))


# --- 3. PostgreSQL ------------------------------------------------------------------------


@dataclass(slots=True)
class _Persisted:
    communities: list[StoredCommunity]
    created: int
    kept: int
    removed: int
    reassigned: int


async def _rows(conn: AsyncConnection, sql: str, **params: Any) -> list[Any]:
    return list(await conn.execute(text(sql), params))


async def _persist(engine: AsyncEngine, found: list[list[int]], min_size: int) -> _Persisted:
    async with engine.begin() as conn:
        await conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _LOCK_KEY})
        details = {
            r.id: Member(r.id, r.type, " ".join(r.name.split()), r.canonical_name,
                         r.episode_count)
            for r in await _rows(
                conn,
                "SELECT id, type, name, canonical_name, episode_count FROM entities "
                "WHERE id = ANY(CAST(:ids AS bigint[]))",
                ids=[m for c in found for m in c],
            )
        }  # fmt: skip
        # Entities deleted since the graph was read drop out (and may take a community below
        # the minimum with them).
        found = [c for c in ([m for m in c if m in details] for c in found) if len(c) >= min_size]
        old_of = {
            int(r.id): int(r.community_id)
            for r in await _rows(
                conn, "SELECT id, community_id FROM entities WHERE community_id IS NOT NULL"
            )
        }
        old = {
            int(r.id): r
            for r in await _rows(conn, "SELECT id, uuid, name, size, created_at FROM communities")
        }
        old_sizes = Counter(old_of.values())
        matched = match_communities(found, old_of, {i: old_sizes.get(i, 0) for i in old})

        communities: list[StoredCommunity] = []
        fresh: list[StoredCommunity] = []
        renamed: list[StoredCommunity] = []
        for members, old_id in zip(found, matched, strict=True):
            group = [details[m] for m in members]
            name = community_name(group)
            if old_id is None:
                item = StoredCommunity(0, str(uuid.uuid4()), name, datetime.now(UTC), group)
                fresh.append(item)
            else:
                row = old[old_id]
                item = StoredCommunity(old_id, row.uuid, name, row.created_at, group)
                if row.name != name or row.size != len(group):
                    renamed.append(item)
            communities.append(item)

        if fresh:
            inserted = await _rows(
                conn,
                "INSERT INTO communities (uuid, name, size) "
                "SELECT * FROM unnest(CAST(:uuids AS text[]), CAST(:names AS text[]), "
                "CAST(:sizes AS int[])) RETURNING id, uuid, created_at",
                uuids=[c.uuid for c in fresh],
                names=[c.name for c in fresh],
                sizes=[len(c.members) for c in fresh],
            )
            by_uuid = {r.uuid: r for r in inserted}
            for c in fresh:
                c.id, c.created_at = int(by_uuid[c.uuid].id), by_uuid[c.uuid].created_at
        if renamed:
            await conn.execute(
                text(
                    "UPDATE communities c SET name = v.name, size = v.size, updated_at = now() "
                    "FROM unnest(CAST(:ids AS bigint[]), CAST(:names AS text[]), "
                    "CAST(:sizes AS int[])) AS v(id, name, size) WHERE c.id = v.id"
                ),
                {
                    "ids": [c.id for c in renamed],
                    "names": [c.name for c in renamed],
                    "sizes": [len(c.members) for c in renamed],
                },
            )
        # Members to their community, everyone else (previously in one) to NULL; only rows
        # that change are written.
        reassigned = await conn.execute(
            text(
                """
                UPDATE entities e SET community_id = n.cid
                FROM (
                    SELECT x.id, v.cid
                    FROM entities x
                    LEFT JOIN unnest(CAST(:ids AS bigint[]), CAST(:cids AS bigint[]))
                        AS v(id, cid) ON v.id = x.id
                    WHERE x.community_id IS DISTINCT FROM v.cid
                ) n
                WHERE e.id = n.id
                """
            ),
            {
                "ids": [m.id for c in communities for m in c.members],
                "cids": [c.id for c in communities for _ in c.members],
            },
        )
        removed = await _rows(
            conn,
            "DELETE FROM communities WHERE NOT (id = ANY(CAST(:ids AS bigint[]))) RETURNING id",
            ids=[c.id for c in communities],
        )
    return _Persisted(
        communities,
        created=len(fresh),
        kept=len(communities) - len(fresh),
        removed=len(removed),
        reassigned=int(reassigned.rowcount or 0),
    )


# --- the whole run ------------------------------------------------------------------------


async def detect_communities(
    engine: AsyncEngine,
    settings: Settings,
    *,
    as_of: datetime,
    graph: KnowledgeGraph | None = None,
) -> CommunityOutcome:
    """Detect the entity communities as of `as_of`, store them in PostgreSQL and, when a
    graph is given, as graphiti Community nodes (see the module docstring)."""
    started = time.monotonic()
    entity_graph = await load_entity_graph(engine, as_of)
    nodes, edges = entity_graph.number_of_nodes(), entity_graph.number_of_edges()
    loaded = time.monotonic()
    # Louvain is CPU-bound for seconds at 100k entities: off the event loop, so the API
    # keeps answering while the nightly run clusters.
    found = await asyncio.to_thread(
        find_communities,
        entity_graph,
        resolution=settings.community_resolution,
        seed=settings.community_seed,
        min_size=settings.community_min_size,
        backend=settings.community_backend,
    )
    del entity_graph  # the largest object of the run: gone before the writes
    clustered = time.monotonic()
    stored = await _persist(engine, found, settings.community_min_size)
    outcome = CommunityOutcome(
        communities=len(stored.communities),
        members=sum(len(c.members) for c in stored.communities),
        created=stored.created,
        kept=stored.kept,
        removed=stored.removed,
        reassigned=stored.reassigned,
    )
    log.info(
        "communities.detected",
        as_of=as_of.isoformat(),
        graph_nodes=nodes,
        graph_edges=edges,
        communities=outcome.communities,
        members=outcome.members,
        created=outcome.created,
        kept=outcome.kept,
        removed=outcome.removed,
        reassigned=outcome.reassigned,
        load_s=round(loaded - started, 3),
        louvain_s=round(clustered - loaded, 3),
        persist_s=round(time.monotonic() - clustered, 3),
    )
    if graph is None:
        return outcome
    group_id = settings.graph_group_id
    try:
        written = await write_graph_communities(
            graph, group_id, stored.communities, community_summary
        )
    except Exception as exc:  # the graph is secondary: PostgreSQL has committed
        error = f"{type(exc).__name__}: {exc}"
        log.warning("communities.graph_failed", group_id=group_id, error=error)
        return replace(outcome, graph_error=error)
    log.info("communities.graph_written", group_id=group_id, **written)
    return outcome
