"""Reading the graph: entities by name, a node's neighbourhood, what was true at a time, and
graphiti's own hybrid search.

Time (bi-temporal, graphiti's fields): `valid_at`/`invalid_at` say when a fact was true in the
world (valid time); `created_at`/`expired_at` say when the graph learnt it and when it learnt
that it had ended (transaction time).

`facts_as_of(as_of)` answers in valid time with everything known now:
    valid_at ≤ as_of  and  (invalid_at is null or invalid_at > as_of)
It does not require created_at ≤ as_of: conversations are often ingested after they happened
(imports, replays, benchmarks whose sessions carry their own dates), and "what was true on
5 May" must include a fact learnt on 6 May about 5 May. Pass `known_at` for the belief view
instead ("what did the graph hold at known_at about as_of"):
    created_at ≤ known_at, and an invalidation counts only once learnt
    (coalesce(expired_at, created_at) ≤ known_at).
A fact's valid_at is, when graphiti's LLM gave it none, the time of the session it was said
in (graphiti's `reference_time`): said then, so true from then on as far as the graph knows.

The no-LLM writer keeps one edge per session for a fact said in several sessions (graphiti's
LLM path merges them into one edge listing several episodes); `facts_as_of` collapses such
restatements (same subject, edge name, object) into the most recent one, carrying all their
episodes, sessions and segments.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from context_engine.extract.schema import canonical_name
from context_engine.graph.base import EpisodeRef, Fact, GraphNode, Neighbourhood
from context_engine.graph.driver import run
from context_engine.graph.store import session_of_episode_name, to_datetime, utc

if TYPE_CHECKING:
    from graphiti_core import Graphiti
    from graphiti_core.driver.driver import GraphDriver

    from context_engine.embed.base import Embedder

MAX_DEPTH = 3
# search(as_of=...) filters after ranking: ask graphiti for this many times `limit`.
AS_OF_OVERFETCH = 4


def at_or_before(expr: str, param: str) -> str:
    """`expr <= param` for a stored datetime. FalkorDB 4.16 answers `<` and `<=` on an
    indexed string property (graphiti's ISO datetimes) wrongly when it uses the range index
    (every row matches); wrapping the property in coalesce() keeps the index out of it. Same
    meaning on Neo4j."""
    return f"coalesce({expr}, {expr}) <= {param}"


_NODE_CORE = {"uuid", "name", "group_id", "summary", "created_at", "name_embedding", "labels"}
_EDGE_CORE = {
    "uuid", "source_node_uuid", "target_node_uuid", "fact", "fact_embedding", "name",
    "group_id", "episodes", "created_at", "expired_at", "valid_at", "invalid_at",
    "reference_time",
}  # fmt: skip

# Properties as [key, value] pairs without the embeddings: a 384-float vector per row is most
# of the bytes and of the client's parsing time (10× slower graph leg when returned).
_NODE_RETURN = """
    n.uuid AS uuid, n.name AS name, labels(n) AS labels, n.summary AS summary,
    n.created_at AS created_at,
    [k IN keys(n) WHERE k <> 'name_embedding' | [k, n[k]]] AS props
"""
_FACT_RETURN = """
    e.uuid AS uuid, e.name AS name, e.fact AS fact, e.episodes AS episodes,
    startNode(e).uuid AS source_uuid, startNode(e).name AS source_name,
    endNode(e).uuid AS target_uuid, endNode(e).name AS target_name,
    coalesce(e.valid_at, e.reference_time) AS valid_at, e.invalid_at AS invalid_at,
    e.created_at AS created_at, e.expired_at AS expired_at,
    [k IN keys(e) WHERE k <> 'fact_embedding' | [k, e[k]]] AS props
"""


def _props(row: dict[str, Any]) -> dict[str, Any]:
    """The `props` column: [key, value] pairs."""
    return {str(k): v for k, v in row.get("props") or []}


def node_from_row(row: dict[str, Any]) -> GraphNode:
    props = _props(row)
    group = str(props.get("group_id") or "")
    hidden = {"Entity", "Entity_" + group.replace("-", "")}
    return GraphNode(
        uuid=row["uuid"],
        name=row["name"],
        labels=[x for x in row.get("labels") or [] if x not in hidden],
        type=props.get("type"),
        summary=row.get("summary") or "",
        created_at=to_datetime(row.get("created_at")),
        attributes={k: v for k, v in props.items() if k not in _NODE_CORE},
    )


def fact_from_row(row: dict[str, Any], sessions: dict[str, str]) -> Fact:
    attributes = {k: v for k, v in _props(row).items() if k not in _EDGE_CORE}
    episodes = list(row.get("episodes") or [])
    session_ids: list[str] = []
    own = attributes.get("session_id")
    for sid in [own, *(sessions.get(e) for e in episodes)]:
        if sid and sid not in session_ids:
            session_ids.append(sid)
    segment = attributes.get("segment_id")
    return Fact(
        uuid=row["uuid"],
        subject=row.get("source_name") or "",
        subject_uuid=row["source_uuid"],
        predicate=row.get("name") or "",
        object=row.get("target_name") or "",
        object_uuid=row["target_uuid"],
        fact=row.get("fact") or "",
        valid_at=to_datetime(row.get("valid_at")),
        invalid_at=to_datetime(row.get("invalid_at")),
        created_at=to_datetime(row.get("created_at")) or datetime.min,
        expired_at=to_datetime(row.get("expired_at")),
        episodes=episodes,
        attributes=attributes,
        session_ids=session_ids,
        segment_ids=[segment] if segment else [],
        sources=[(str(own), str(segment))] if own and segment else [],
    )


def collapse_restatements(facts: list[Fact], *, by_period: bool = False) -> list[Fact]:
    """One fact per (subject, edge name, object): the most recently valid one, carrying the
    episodes, sessions and segments of all (input ordered most recent first). `by_period`:
    one per period instead (same triple and same end), so a fact that ended and was said
    again later shows both its ended period and its current one."""
    kept: dict[tuple[str, str, str, Any], Fact] = {}
    for fact in facts:
        end = fact.invalid_at if by_period else None
        key = (fact.subject_uuid, fact.predicate, fact.object_uuid, end)
        first = kept.get(key)
        if first is None:
            kept[key] = fact
            continue
        for attr in ("episodes", "session_ids", "segment_ids", "sources"):
            merged = getattr(first, attr)
            merged.extend(x for x in getattr(fact, attr) if x not in merged)
    return list(kept.values())


class GraphQueries:
    def __init__(
        self, driver: GraphDriver, group_id: str, graphiti: Graphiti, embedder: Embedder
    ) -> None:
        self.driver = driver
        self.group_id = group_id
        self.graphiti = graphiti
        self.embedder = embedder

    async def _facts(self, rows: list[dict[str, Any]]) -> list[Fact]:
        episodes = sorted({e for r in rows for e in (r.get("episodes") or [])})
        sessions: dict[str, str] = {}
        if episodes:
            for r in await run(
                self.driver,
                "MATCH (ep:Episodic) WHERE ep.uuid IN $uuids RETURN ep.uuid AS uuid, "
                "ep.name AS name",
                uuids=episodes,
            ):
                sid = session_of_episode_name(r.get("name"))
                if sid:
                    sessions[r["uuid"]] = sid
        return [fact_from_row(r, sessions) for r in rows]

    async def find_entity_nodes(
        self, name: str, type: str | None = None, limit: int = 20
    ) -> list[GraphNode]:
        """Entity nodes called `name` (case-insensitive), optionally of one type (our type
        "person" or a graphiti label "Person")."""
        wanted = canonical_name(name)
        if not wanted:
            return []
        type_filter = ""
        params: dict[str, Any] = {}
        if type:
            type_filter = "AND (n.type = $type OR $label IN labels(n))"
            params = {"type": type.casefold(), "label": type[:1].upper() + type[1:]}
        rows = await run(
            self.driver,
            "MATCH (n:Entity) WHERE n.group_id = $group_id "
            "AND (n.canonical_name = $canonical OR toLower(n.name) = $lower) "
            f"{type_filter} RETURN {_NODE_RETURN} ORDER BY n.created_at LIMIT $limit",
            group_id=self.group_id,
            canonical=wanted,
            lower=" ".join(name.split()).lower(),
            limit=limit,
            **params,
        )
        return [node_from_row(r) for r in rows]

    async def get_node(self, node_uuid: str) -> GraphNode | None:
        rows = await run(
            self.driver,
            f"MATCH (n:Entity {{uuid: $uuid}}) WHERE n.group_id = $group_id RETURN {_NODE_RETURN}",
            uuid=node_uuid,
            group_id=self.group_id,
        )
        return node_from_row(rows[0]) if rows else None

    async def neighbourhood(
        self, node_uuid: str, depth: int = 1, limit: int = 500
    ) -> Neighbourhood | None:
        """The node, the nodes within `depth` facts of it, every fact on the way (valid or
        not, oldest first, with valid/invalid times, episodes, sessions and segments), and the
        sessions that mention it. None when there is no such node."""
        node = await self.get_node(node_uuid)
        if node is None:
            return None
        depth = max(1, min(int(depth), MAX_DEPTH))
        rows = await run(
            self.driver,
            f"MATCH p = (n:Entity {{uuid: $uuid}})-[:RELATES_TO*1..{depth}]-(:Entity) "
            "UNWIND relationships(p) AS e WITH DISTINCT e "
            f"WHERE e.group_id = $group_id RETURN {_FACT_RETURN} LIMIT $limit",
            uuid=node_uuid,
            group_id=self.group_id,
            limit=limit,
        )
        facts = await self._facts(rows)
        facts.sort(key=lambda f: (f.valid_at is None, f.valid_at or f.created_at, f.uuid))
        others = sorted({f.subject_uuid for f in facts} | {f.object_uuid for f in facts})
        others = [u for u in others if u != node_uuid]
        neighbours: list[GraphNode] = []
        if others:
            neighbour_rows = await run(
                self.driver,
                f"MATCH (n:Entity) WHERE n.uuid IN $uuids RETURN {_NODE_RETURN}",
                uuids=others,
            )
            neighbours = sorted(
                (node_from_row(r) for r in neighbour_rows), key=lambda n: (n.name, n.uuid)
            )
        episode_rows = await run(
            self.driver,
            "MATCH (ep:Episodic)-[:MENTIONS]->(n:Entity {uuid: $uuid}) "
            "RETURN DISTINCT ep.uuid AS uuid, ep.name AS name, ep.valid_at AS valid_at",
            uuid=node_uuid,
        )
        episodes = sorted(
            (
                EpisodeRef(
                    r["uuid"],
                    r.get("name") or "",
                    session_of_episode_name(r.get("name")),
                    to_datetime(r.get("valid_at")),
                )
                for r in episode_rows
            ),
            key=lambda e: (e.valid_at is None, e.valid_at or datetime.min, e.uuid),
        )
        return Neighbourhood(node, neighbours, facts, episodes)

    async def facts_as_of(
        self,
        as_of: datetime,
        subject: str | None = None,
        *,
        entity_uuid: str | None = None,
        known_at: datetime | None = None,
        limit: int = 100,
        collapse: bool = True,
        entity_uuids: Sequence[str] | None = None,
        history: bool = False,
    ) -> list[Fact]:
        """What was true at `as_of` (see the module docstring), most recent first.
        `subject`: facts whose subject is called that; `entity_uuid` / `entity_uuids`: facts
        on either side of that node / of any of those nodes (one query for several).
        `history`: also the facts that had ended by `as_of`, each with the fact that ended it
        (`Fact.ended_by`)."""
        where = [
            "e.group_id = $group_id",
            "coalesce(e.valid_at, e.reference_time) IS NOT NULL",
            # `<=` through coalesce(): see at_or_before
            "coalesce(e.valid_at, e.reference_time) <= $as_of",
        ]
        params: dict[str, Any] = {"group_id": self.group_id, "as_of": utc(as_of)}
        if history:
            pass  # every fact said by as_of, ended or not
        elif known_at is None:
            where.append("(e.invalid_at IS NULL OR e.invalid_at > $as_of)")
        else:
            where.append(at_or_before("e.created_at", "$known_at"))
            where.append(
                "(e.invalid_at IS NULL OR e.invalid_at > $as_of "
                "OR coalesce(e.expired_at, e.created_at) > $known_at)"
            )
            params["known_at"] = utc(known_at)
        if subject is not None:
            where.append("(s.canonical_name = $canonical OR toLower(s.name) = $lower)")
            params["canonical"] = canonical_name(subject)
            params["lower"] = " ".join(subject.split()).lower()
        if entity_uuid is not None:
            where.append("(s.uuid = $entity OR t.uuid = $entity)")
            params["entity"] = entity_uuid
        if entity_uuids is not None:
            where.append("(s.uuid IN $entities OR t.uuid IN $entities)")
            params["entities"] = list(entity_uuids)
        # Restatements collapse after the query: fetch enough rows to fill `limit`.
        fetch = limit * 10 if collapse else limit
        rows = await run(
            self.driver,
            "MATCH (s:Entity)-[e:RELATES_TO]->(t:Entity) WHERE "
            + " AND ".join(where)
            + f" RETURN {_FACT_RETURN} ORDER BY valid_at DESC, uuid LIMIT $fetch",
            fetch=fetch,
            **params,
        )
        facts = await self._facts(rows)
        if collapse:
            facts = collapse_restatements(facts, by_period=history)
        facts = facts[:limit]
        if history:
            await self._ended_by(facts)
        return facts

    async def _ended_by(self, facts: list[Fact]) -> None:
        """Set `ended_by` of each ended fact: the fact that ended it (uuid, text, since when),
        or only the time when another writer (graphiti's LLM) ended it without saying how."""
        enders = sorted(
            {
                str(f.attributes["invalidated_by"])
                for f in facts
                if f.invalid_at is not None and f.attributes.get("invalidated_by")
            }
        )
        found: dict[str, dict[str, Any]] = {}
        if enders:
            rows = await run(
                self.driver,
                "MATCH ()-[e:RELATES_TO]->() WHERE e.uuid IN $uuids RETURN e.uuid AS uuid, "
                "e.fact AS fact, e.name AS name, "
                "coalesce(e.valid_at, e.reference_time) AS valid_at",
                uuids=enders,
            )
            found = {r["uuid"]: r for r in rows}
        for f in facts:
            if f.invalid_at is None:
                continue
            by = str(f.attributes.get("invalidated_by") or "")
            row = found.get(by)
            f.ended_by = {
                "uuid": by or None,
                "fact": row.get("fact") if row else None,
                "predicate": row.get("name") if row else None,
                "valid_at": to_datetime(row.get("valid_at")) if row else f.invalid_at,
            }

    async def search(
        self, query: str, limit: int = 10, as_of: datetime | None = None
    ) -> list[Fact]:
        """graphiti's hybrid fact search (BM25 + cosine over facts, RRF) in our group, with
        our embedder's query vector; `as_of` keeps only facts true at that time (filtered
        here: graphiti's `<=` date filters hit the FalkorDB range-index bug, see
        `at_or_before`)."""
        from graphiti_core.search.search_config_recipes import EDGE_HYBRID_SEARCH_RRF

        if not query.strip():
            return []
        # graphiti's own `search()` mutates the shared recipe's limit: use a copy.
        config = EDGE_HYBRID_SEARCH_RRF.model_copy(deep=True)
        config.limit = limit if as_of is None else limit * AS_OF_OVERFETCH
        vector = (await self.embedder.embed_query(query)).tolist()
        results = await self.graphiti.search_(
            query, config=config, group_ids=[self.group_id], query_vector=vector
        )
        edges = results.edges
        if not edges:
            return []
        rows = await run(
            self.driver,
            "MATCH (s:Entity)-[e:RELATES_TO]->(t:Entity) WHERE e.uuid IN $uuids "
            f"RETURN {_FACT_RETURN}",
            uuids=[e.uuid for e in edges],
        )
        by_uuid = {f.uuid: f for f in await self._facts(rows)}
        found = [by_uuid[e.uuid] for e in edges if e.uuid in by_uuid]
        if as_of is not None:
            when = utc(as_of)
            found = [
                f
                for f in found
                if f.valid_at is not None
                and f.valid_at <= when
                and (f.invalid_at is None or f.invalid_at > when)
            ]
        return found[:limit]
