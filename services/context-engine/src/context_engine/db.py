"""PostgreSQL access: the async SQLAlchemy engine of the context engine."""

from __future__ import annotations

import asyncio

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from context_engine.config import Settings


def create_engine(settings: Settings) -> AsyncEngine:
    return create_async_engine(
        settings.database_url.get_secret_value(),
        pool_size=settings.db_pool_size,
        pool_pre_ping=True,
    )


async def ping(engine: AsyncEngine, timeout_s: float) -> bool:
    """True when PostgreSQL answers `SELECT 1` within the timeout."""
    try:
        async with asyncio.timeout(timeout_s), engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
    except (TimeoutError, OSError, Exception):  # any failure means "not ready"
        return False
    return True
