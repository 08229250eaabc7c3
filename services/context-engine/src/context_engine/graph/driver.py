"""Build graphiti's GraphDriver from the settings, and run our own Cypher through it.

`graph_backend` picks the module: falkordb.py (embedded default) or neo4j.py (production).
Both give a graphiti `GraphDriver`; nothing above this module knows which one it is. Neo4j's
driver is imported only when Neo4j is configured.

FalkorDB partitions by graph: graphiti keeps each group id in the graph named after it
(it clones the driver per group id), so on FalkorDB the driver is opened on the graph named
`graph_group_id` (`graph_database` is not used there). On Neo4j, `graph_database` is the
database and the group id a property, as graphiti does it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from context_engine.graph.base import GraphConfigError, GraphUnavailableError

if TYPE_CHECKING:
    from graphiti_core.driver.driver import GraphDriver

    from context_engine.config import Settings

_GROUP_ID = re.compile(r"^[A-Za-z0-9_-]+$")  # graphiti's validate_group_id


def validate_settings(settings: Settings) -> None:
    """Raise GraphConfigError, naming the variable, when the graph settings cannot work."""
    if not settings.graph_url:
        raise GraphConfigError(
            f"no knowledge graph configured: set {settings.env_name('graph_url')} "
            "(redis://[:password@]host:port for FalkorDB, bolt://host:7687 for Neo4j)"
        )
    if not _GROUP_ID.match(settings.graph_group_id):
        raise GraphConfigError(
            f"{settings.env_name('graph_group_id')}={settings.graph_group_id!r}: a group id "
            "may hold only ASCII letters, digits, '-' and '_'"
        )
    if settings.graph_backend == "falkordb":
        from context_engine.graph.falkordb import check_settings

        check_settings(settings)
    elif settings.graph_backend == "neo4j":
        from context_engine.graph.neo4j import check_settings as check_neo4j

        check_neo4j(settings)
    else:  # pragma: no cover (Settings validates the literal)
        raise GraphConfigError(f"unknown {settings.env_name('graph_backend')}")


def build_driver(settings: Settings) -> GraphDriver:
    """A graphiti GraphDriver for the configured backend (no connection is made yet)."""
    validate_settings(settings)
    if settings.graph_backend == "neo4j":
        from context_engine.graph.neo4j import build_neo4j_driver

        return build_neo4j_driver(settings)
    from context_engine.graph.falkordb import build_falkordb_driver

    return build_falkordb_driver(settings)


def unavailable_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean "the graph database did not answer" on either backend."""
    import redis.exceptions

    errors: list[type[BaseException]] = [
        redis.exceptions.ConnectionError,  # includes AuthenticationError
        redis.exceptions.TimeoutError,
        ConnectionError,
        TimeoutError,
        OSError,
    ]
    try:
        import neo4j.exceptions

        errors += [
            neo4j.exceptions.ServiceUnavailable,
            neo4j.exceptions.SessionExpired,
            neo4j.exceptions.AuthError,
        ]
    except ImportError:  # pragma: no cover (graphiti-core depends on neo4j)
        pass
    return tuple(errors)


async def run(driver: GraphDriver, cypher: str, **params: Any) -> list[dict[str, Any]]:
    """Run one Cypher query through graphiti's driver; records as plain dicts.
    Datetime parameters are stored as graphiti stores them (ISO strings in UTC on FalkorDB,
    native on Neo4j), so comparisons with graphiti's own fields work on both."""
    try:
        result = await driver.execute_query(cypher, **params)
    except unavailable_errors() as exc:
        raise GraphUnavailableError(
            f"graph database unavailable: {type(exc).__name__}: {exc}"
        ) from exc
    if result is None:  # FalkorDB: an index that already exists
        return []
    records = result[0] if isinstance(result, tuple) else result.records
    return [dict(r) for r in records]
