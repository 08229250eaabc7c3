"""Small Cypher helpers shared by the writer, the LLM path and the queries: datetimes read
back from either backend, a session's episodes, removing an episode the way graphiti does."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from context_engine.graph.driver import run

if TYPE_CHECKING:
    from graphiti_core.driver.driver import GraphDriver


def to_datetime(value: Any) -> datetime | None:
    """A datetime as stored by graphiti (ISO string on FalkorDB, neo4j DateTime on Neo4j),
    as an aware UTC datetime."""
    if value is None:
        return None
    if isinstance(value, str):
        parsed = datetime.fromisoformat(value)
    elif isinstance(value, datetime):
        parsed = value
    elif hasattr(value, "to_native"):
        parsed = value.to_native()
    else:
        return None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def utc(value: datetime) -> datetime:
    """Aware UTC (a naive datetime is taken to be UTC already)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def session_episode_name(session_id: str) -> str:
    return f"session-{session_id}"


def session_of_episode_name(name: str | None) -> str | None:
    if name and name.startswith("session-"):
        return name[len("session-") :]
    return None


async def session_episodes(driver: GraphDriver, group_id: str, session_id: str) -> list[str]:
    """Uuids of the episodes of a session (normally one)."""
    rows = await run(
        driver,
        "MATCH (e:Episodic) WHERE e.group_id = $group_id AND e.name = $name RETURN e.uuid AS uuid",
        group_id=group_id,
        name=session_episode_name(session_id),
    )
    return [r["uuid"] for r in rows]


async def all_session_episodes(driver: GraphDriver, group_id: str) -> dict[str, list[str]]:
    """Every session episode of the group: session id → episode uuids (the drift check)."""
    rows = await run(
        driver,
        "MATCH (e:Episodic) WHERE e.group_id = $group_id AND e.name STARTS WITH 'session-' "
        "RETURN e.name AS name, e.uuid AS uuid",
        group_id=group_id,
    )
    out: dict[str, list[str]] = {}
    for r in rows:
        sid = session_of_episode_name(r["name"])
        if sid:
            out.setdefault(sid, []).append(r["uuid"])
    return out


async def remove_episode(
    driver: GraphDriver, group_id: str, episode_uuid: str
) -> list[tuple[str, str, str]]:
    """Remove an episode: the facts only it stated, the episode, and the nodes nothing refers
    to any more. Unlike graphiti's `remove_episode`, a fact that later episodes restated (they
    are in its `episodes` list) is kept for them, with this episode dropped from the list, so
    no fact points at a missing episode and no other session loses a fact. Returns the
    deleted facts as (source uuid, target uuid, edge name): the facts they had ended may be
    valid again (the caller recomputes those timelines)."""
    deleted = await run(
        driver,
        """
        MATCH (s:Entity)-[e:RELATES_TO]->(t:Entity)
        WHERE e.group_id = $group_id AND e.episodes = [$episode]
        RETURN s.uuid AS source, t.uuid AS target, e.name AS name
        """,
        group_id=group_id,
        episode=episode_uuid,
    )
    await run(
        driver,
        """
        MATCH (s:Entity)-[e:RELATES_TO]->(t:Entity)
        WHERE e.group_id = $group_id AND e.episodes = [$episode]
        DELETE e
        """,
        group_id=group_id,
        episode=episode_uuid,
    )
    await run(
        driver,
        """
        MATCH (s:Entity)-[e:RELATES_TO]->(t:Entity)
        WHERE e.group_id = $group_id AND $episode IN e.episodes
        SET e.episodes = [x IN e.episodes WHERE x <> $episode]
        """,
        group_id=group_id,
        episode=episode_uuid,
    )
    mentioned = await run(
        driver,
        "MATCH (ep:Episodic {uuid: $episode})-[:MENTIONS]->(n:Entity) RETURN n.uuid AS uuid",
        episode=episode_uuid,
    )
    await run(
        driver,
        "MATCH (ep:Episodic {uuid: $episode}) DETACH DELETE ep",
        episode=episode_uuid,
    )
    await delete_orphans(driver, [r["uuid"] for r in mentioned])
    return [(r["source"], r["target"], r["name"]) for r in deleted]


async def delete_orphans(driver: GraphDriver, node_uuids: list[str]) -> None:
    """Delete those of these entity nodes that nothing but community membership touches any
    more (a HAS_MEMBER edge is derived from the entity, it must not keep it alive)."""
    if not node_uuids:
        return
    await run(
        driver,
        """
        MATCH (n:Entity) WHERE n.uuid IN $uuids
        OPTIONAL MATCH (n)-[r]-() WHERE type(r) <> 'HAS_MEMBER'
        WITH n, count(r) AS degree
        WHERE degree = 0
        DETACH DELETE n
        """,
        uuids=node_uuids,
    )


async def forget_text(
    driver: GraphDriver,
    group_id: str,
    needles: Sequence[str],
    matches: Callable[[str], bool],
    session_ids: Sequence[str],
) -> dict[str, int]:
    """Forget a name everywhere in the group: entity nodes named by it (with their edges),
    facts and episodes that state it, communities that name it; summaries that only mention
    it are blanked (graphiti's summaries are where deleted facts survive). Candidates are
    found by case-folded substring (`needles`; Cypher has no portable word boundary) and
    confirmed by `matches`. Facts still attributed to `session_ids` go too."""
    counts = {"nodes": 0, "summaries": 0, "facts": 0, "episodes": 0, "communities": 0}
    ends: set[str] = set()
    for needle in needles:
        nodes = await run(
            driver,
            """MATCH (n:Entity) WHERE n.group_id = $g AND (toLower(n.name) CONTAINS $x
               OR toLower(coalesce(n.summary, '')) CONTAINS $x)
               RETURN n.uuid AS uuid, n.name AS name, n.summary AS summary""",
            g=group_id,
            x=needle,
        )
        drop = [r["uuid"] for r in nodes if matches(r["name"] or "")]
        blank = [r["uuid"] for r in nodes if r["uuid"] not in drop and matches(r["summary"] or "")]
        if drop:
            near = await run(
                driver,
                "MATCH (n:Entity)-[:RELATES_TO]-(m:Entity) WHERE n.uuid IN $u "
                "RETURN m.uuid AS uuid",
                u=drop,
            )
            ends.update(r["uuid"] for r in near)
            await run(driver, "MATCH (n:Entity) WHERE n.uuid IN $u DETACH DELETE n", u=drop)
        if blank:
            await run(driver, "MATCH (n:Entity) WHERE n.uuid IN $u SET n.summary = ''", u=blank)
        counts["nodes"] += len(drop)
        counts["summaries"] += len(blank)
        edges = await run(
            driver,
            """MATCH (s:Entity)-[e:RELATES_TO]->(t:Entity) WHERE e.group_id = $g
               AND (toLower(coalesce(e.fact, '')) CONTAINS $x
                    OR toLower(coalesce(e.evidence, '')) CONTAINS $x)
               RETURN e.uuid AS uuid, e.fact AS fact, e.evidence AS evidence,
                      s.uuid AS s, t.uuid AS t""",
            g=group_id,
            x=needle,
        )
        gone = [r for r in edges if matches(r["fact"] or "") or matches(r["evidence"] or "")]
        counts["facts"] += await _delete_facts(driver, gone, ends)
        episodes = await run(
            driver,
            """MATCH (e:Episodic) WHERE e.group_id = $g
               AND toLower(coalesce(e.content, '')) CONTAINS $x
               RETURN e.uuid AS uuid, e.content AS content""",
            g=group_id,
            x=needle,
        )
        for r in episodes:
            if matches(r["content"] or ""):
                await remove_episode(driver, group_id, r["uuid"])
                counts["episodes"] += 1
        communities = await run(
            driver,
            """MATCH (c:Community) WHERE c.group_id = $g AND (toLower(c.name) CONTAINS $x
               OR toLower(coalesce(c.summary, '')) CONTAINS $x)
               RETURN c.uuid AS uuid, c.name AS name, c.summary AS summary""",
            g=group_id,
            x=needle,
        )
        named = [r["uuid"] for r in communities if matches(r["name"] or "")
                 or matches(r["summary"] or "")]  # fmt: skip
        if named:
            await run(driver, "MATCH (c:Community) WHERE c.uuid IN $u DETACH DELETE c", u=named)
        counts["communities"] += len(named)
    if session_ids:
        stale = await run(
            driver,
            """MATCH (s:Entity)-[e:RELATES_TO]->(t:Entity)
               WHERE e.group_id = $g AND e.session_id IN $sids
               RETURN e.uuid AS uuid, s.uuid AS s, t.uuid AS t""",
            g=group_id,
            sids=list(session_ids),
        )
        counts["facts"] += await _delete_facts(driver, stale, ends)
    await delete_orphans(driver, sorted(ends))
    return counts


async def _delete_facts(driver: GraphDriver, rows: list[dict[str, Any]], ends: set[str]) -> int:
    """Delete these facts (rows of uuid, s, t); their end nodes join `ends` (orphan check)."""
    if rows:
        await run(
            driver,
            "MATCH (:Entity)-[e:RELATES_TO]->(:Entity) WHERE e.uuid IN $u DELETE e",
            u=[r["uuid"] for r in rows],
        )
        ends.update(r["s"] for r in rows)
        ends.update(r["t"] for r in rows)
    return len(rows)
