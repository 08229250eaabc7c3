"""Small Cypher helpers shared by the writer, the LLM path and the queries: datetimes read
back from either backend, a session's episodes, removing an episode the way graphiti does."""

from __future__ import annotations

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


async def remove_episode(driver: GraphDriver, group_id: str, episode_uuid: str) -> None:
    """Remove an episode: the facts only it stated, the episode, and the nodes nothing refers
    to any more. Unlike graphiti's `remove_episode`, a fact that later episodes restated (they
    are in its `episodes` list) is kept for them, with this episode dropped from the list, so
    no fact points at a missing episode and no other session loses a fact."""
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
