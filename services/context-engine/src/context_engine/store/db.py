"""PostgreSQL access: the engine's async SQLAlchemy pools, and the job queue's DSN."""

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
    """`main` serves the API, ingestion and jobs; `events` only writes observability events;
    `reads` serves retrieval (/v1/context and what it reads: one statement at a time, in
    autocommit, no ping on checkout: a search makes several short queries and each
    transaction's BEGIN/ROLLBACK and each checkout's ping were a round trip of their own —
    docs/benchmarks.md); `probe` is /health's own connection, so a health check never waits
    for a connection behind searches."""

    main: AsyncEngine
    events: AsyncEngine
    reads: AsyncEngine
    probe: AsyncEngine

    def _all(self) -> dict[str, AsyncEngine]:
        return {"main": self.main, "events": self.events, "reads": self.reads,
                "probe": self.probe}  # fmt: skip

    async def dispose(self) -> None:
        for engine in self._all().values():
            await engine.dispose()

    def stats(self) -> dict[str, dict[str, int]]:
        """How busy each pool is (the dragon creature's metric)."""
        return {name: pool_stats(engine) for name, engine in self._all().items()}


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


def create_engine(
    settings: Settings,
    pool_size: int | None = None,
    *,
    autocommit: bool = False,
    ping_on_checkout: bool = True,
) -> AsyncEngine:
    """A pool. `autocommit`: no BEGIN/ROLLBACK around each statement (for pools that only
    read, a statement at a time). Without `ping_on_checkout` a connection PostgreSQL dropped
    fails its one statement, which makes SQLAlchemy invalidate the pool's older connections,
    so the next checkout is a fresh one (a search leg reports that one failure; retrieval
    degrades as for any failing leg)."""
    size = pool_size or settings.db_pool_size
    extra: dict[str, object] = {"isolation_level": "AUTOCOMMIT"} if autocommit else {}
    return create_async_engine(
        settings.database_url.get_secret_value(),
        pool_size=size,
        max_overflow=size,
        pool_pre_ping=ping_on_checkout,
        **extra,
        # asyncpg prepares every statement; after five runs PostgreSQL may switch a statement
        # to a generic plan, which cannot see how selective a tsquery or a time window is and
        # scans the whole spoken_at index instead (docs/benchmarks.md). Plan every execution.
        connect_args={"server_settings": {"plan_cache_mode": "force_custom_plan"}},
    )


def create_databases(settings: Settings) -> Databases:
    return Databases(
        main=create_engine(settings),
        events=create_engine(settings, pool_size=settings.events_pool_size),
        reads=create_engine(
            settings, settings.reads_pool_size, autocommit=True, ping_on_checkout=False
        ),
        # pinged on checkout: a health check after a PostgreSQL restart is not failed by the
        # connection the restart broke
        probe=create_engine(settings, 1, autocommit=True),
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
