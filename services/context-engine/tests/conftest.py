from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from context_engine.config import Settings
from context_engine.store.migrate import upgrade

# Helpers beside the tests import as top-level modules (pytest runs in importlib mode); the
# PostgreSQL fixtures come from pg_harness, a plugin of the root conftest.py.
sys.path.insert(0, str(Path(__file__).parent))
from engine_harness import Engine, engine_settings, start_engine, start_graph_engine
from pg_harness import fresh_database


@pytest.fixture
def settings(db_url: str, tmp_path: Path) -> Settings:
    return engine_settings(
        tmp_path,
        db_url,
        watch_debounce_s=0.1,
        watch_max_delay_s=0.5,
        reconcile_interval_s=2.0,
        job_retry_base_s=0.0,
        job_max_attempts=3,
        gc_freeze=False,  # engines come and go in this one process
    )


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def module_database(postgres_server: tuple[str, str]) -> AsyncIterator[str]:
    """A fresh database for a module's shared engine (db_url is per test)."""
    async with fresh_database(postgres_server) as url:
        yield url


@pytest.fixture
async def db(db_url: str) -> AsyncIterator[AsyncEngine]:
    """A migrated empty database (no engine running on it)."""
    await asyncio.to_thread(upgrade, db_url)
    eng = create_async_engine(db_url)
    yield eng
    await eng.dispose()


@pytest.fixture
async def engine(settings: Settings) -> AsyncIterator[Engine]:
    async for e in start_engine(settings):
        yield e


@pytest.fixture
async def graph_engine(
    settings: Settings, falkordb_server: str, graph_group: str
) -> AsyncIterator[Engine]:
    """The engine with a knowledge graph on the test FalkorDB (its own group), once open."""
    with_graph = {"graph_url": falkordb_server, "graph_group_id": graph_group}
    async for e in start_graph_engine(settings.model_copy(update=with_graph)):
        yield e
