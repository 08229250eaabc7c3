"""PostgreSQL access: the engine's two async SQLAlchemy pools, and the job queue's DSN."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

from psycopg.conninfo import make_conninfo
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from context_engine.config import Settings


@dataclass(frozen=True, slots=True)
class Databases:
    """`main` serves the API, ingestion and jobs; `events` only writes observability events."""

    main: AsyncEngine
    events: AsyncEngine

    async def dispose(self) -> None:
        await self.main.dispose()
        await self.events.dispose()

    def stats(self) -> dict[str, dict[str, int]]:
        """How busy each pool is (the dragon creature's metric)."""
        return {"main": pool_stats(self.main), "events": pool_stats(self.events)}


def pool_stats(engine: AsyncEngine) -> dict[str, int]:
    """A pool's size, its connections checked out and those idle (what the pool class reports:
    a pool without these, like NullPool, gives an empty dict)."""
    pool = engine.pool
    stats: dict[str, int] = {}
    for key, method in (("size", "size"), ("checked_out", "checkedout"), ("idle", "checkedin")):
        read = getattr(pool, method, None)
        if callable(read):
            stats[key] = int(read())
    return stats


def create_engine(settings: Settings, pool_size: int | None = None) -> AsyncEngine:
    return create_async_engine(
        settings.database_url.get_secret_value(),
        pool_size=pool_size or settings.db_pool_size,
        max_overflow=pool_size or settings.db_pool_size,
        pool_pre_ping=True,
        # asyncpg prepares every statement; after five runs PostgreSQL may switch a statement
        # to a generic plan, which cannot see how selective a tsquery or a time window is and
        # scans the whole spoken_at index instead (docs/benchmarks.md). Plan every execution.
        connect_args={"server_settings": {"plan_cache_mode": "force_custom_plan"}},
    )


def create_databases(settings: Settings) -> Databases:
    return Databases(
        main=create_engine(settings),
        events=create_engine(settings, pool_size=settings.events_pool_size),
    )


def libpq_conninfo(sqlalchemy_url: str) -> str:
    """The libpq connection string for the same database (procrastinate uses psycopg).
    A unix-socket URL (`...@/db?host=/run/pg`) keeps its socket directory."""
    url = make_url(sqlalchemy_url)
    host = url.host or url.query.get("host")
    if isinstance(host, tuple):
        host = host[0]
    port = url.port
    # asyncpg accepts the socket file itself (`/run/pg/.s.PGSQL.5432`); libpq wants its
    # directory and the port.
    socket = re.fullmatch(r"(.+)/\.s\.PGSQL\.(\d+)", host or "")
    if socket is not None:
        host, port = socket.group(1), int(socket.group(2))
    params = {
        "host": host,
        "port": port,
        "user": url.username,
        "password": url.password,
        "dbname": url.database,
    }
    return make_conninfo(**{k: v for k, v in params.items() if v is not None})


async def ping(engine: AsyncEngine, timeout_s: float) -> bool:
    """True when PostgreSQL answers `SELECT 1` within the timeout."""
    try:
        async with asyncio.timeout(timeout_s), engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
    except Exception:  # any failure (timeout, refused, auth) means "not ready"
        return False
    return True
