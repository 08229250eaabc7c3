"""The context engine's service shape, on a real PostgreSQL."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import httpx
from asgi_lifespan import LifespanManager

from context_engine.app import create_app
from context_engine.config import Settings

TOKEN = "c" * 32


async def _get_health(settings: Settings, wait_for_ok_s: float = 0) -> httpx.Response:
    """GET /health, polling up to `wait_for_ok_s` for the start-up (migrations, then the
    vector index opening) to finish."""
    app = create_app(settings)
    transport = httpx.ASGITransport(app=app)
    async with (
        LifespanManager(app),
        httpx.AsyncClient(transport=transport, base_url="http://t") as c,
    ):
        deadline = asyncio.get_running_loop().time() + wait_for_ok_s
        while True:
            r = await c.get("/health")
            ok = r.status_code == 200 and r.json()["status"] == "ok"
            if ok or asyncio.get_running_loop().time() > deadline:
                return r
            await asyncio.sleep(0.1)


def _dirs(tmp_path: Path) -> dict[str, Path]:
    return {
        "transcripts_dir": tmp_path / "transcripts",
        "events_dir": tmp_path / "events",
        "search_index_dir": tmp_path / "search-index",
        "vector_dir": tmp_path / "vectors",
    }


async def test_healthy_when_postgres_answers(postgres_url: str, tmp_path: Path) -> None:
    r = await _get_health(
        Settings(internal_token=TOKEN, database_url=postgres_url, **_dirs(tmp_path)),
        wait_for_ok_s=60,
    )
    assert r.status_code == 200 and r.json() == {"status": "ok"}


async def test_unavailable_but_running_when_postgres_is_unreachable(tmp_path: Path) -> None:
    # The engine starts anyway (migrations retry in the background) and says it is not ready.
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql+asyncpg://heros:x@127.0.0.1:{port}/heros"
    r = await _get_health(
        Settings(internal_token=TOKEN, database_url=url, health_timeout_s=1.0, **_dirs(tmp_path))
    )
    assert r.status_code == 503 and r.json()["status"] == "unavailable"
    # What else it is without says only layer names: no address, backend or version.
    assert set(r.json().get("degraded", [])) <= {"graph", "vectors", "embedder", "llm", "jobs"}
