"""Neo4j: the production graph (docker-compose), reached through graphiti's Neo4jDriver.

Loaded only when CONTEXT_ENGINE_GRAPH_BACKEND=neo4j. Settings: CONTEXT_ENGINE_GRAPH_URL
(bolt:// or neo4j://, with +s / +ssc for TLS), CONTEXT_ENGINE_GRAPH_USER,
CONTEXT_ENGINE_GRAPH_PASSWORD, CONTEXT_ENGINE_GRAPH_DATABASE. Misconfiguration is a
GraphConfigError naming them, raised before any connection is tried.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from context_engine.graph.base import GraphConfigError

if TYPE_CHECKING:
    from graphiti_core.driver.driver import GraphDriver

    from context_engine.config import Settings

SCHEMES = ("bolt", "bolt+s", "bolt+ssc", "neo4j", "neo4j+s", "neo4j+ssc")


def check_settings(settings: Settings) -> None:
    url_env = settings.env_name("graph_url")
    user_env = settings.env_name("graph_user")
    password_env = settings.env_name("graph_password")
    url = settings.graph_url or ""
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise GraphConfigError(
            f"{url_env}: Neo4j needs a bolt://host:7687 or neo4j://host:7687 URL "
            f"(got scheme {parts.scheme or 'none'!r}); for the embedded FalkorDB set "
            f"{settings.env_name('graph_backend')}=falkordb"
        )
    if not parts.hostname:
        raise GraphConfigError(f"{url_env}: no host in the Neo4j URL")
    if parts.username or parts.password:
        raise GraphConfigError(
            f"{url_env}: put the Neo4j credentials in {user_env} and {password_env}, not in the URL"
        )
    if not settings.graph_user:
        raise GraphConfigError(f"Neo4j needs a user: set {user_env}")
    if settings.graph_password is None or not settings.graph_password.get_secret_value():
        raise GraphConfigError(
            f"Neo4j needs a password: set {password_env} (user from {user_env}, "
            f"server from {url_env})"
        )


def build_neo4j_driver(settings: Settings) -> GraphDriver:
    check_settings(settings)
    try:
        from graphiti_core.driver.neo4j_driver import Neo4jDriver
    except ImportError as exc:  # pragma: no cover (graphiti-core depends on neo4j)
        raise GraphConfigError(f"the Neo4j driver is not installed: {exc}") from exc
    assert settings.graph_url is not None and settings.graph_password is not None
    return Neo4jDriver(
        settings.graph_url,
        settings.graph_user,
        settings.graph_password.get_secret_value(),
        database=settings.graph_database,
    )
