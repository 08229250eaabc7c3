"""The context engine's service shape, on a real PostgreSQL."""

from __future__ import annotations

import socket

import httpx
from asgi_lifespan import LifespanManager

from context_engine.app import create_app
from context_engine.config import Settings

TOKEN = "c" * 32


async def _get_health(settings: Settings) -> httpx.Response:
    app = create_app(settings)
    transport = httpx.ASGITransport(app=app)
    async with (
        LifespanManager(app),
        httpx.AsyncClient(transport=transport, base_url="http://t") as c,
    ):
        return await c.get("/health")


async def test_healthy_when_postgres_answers(postgres_url: str) -> None:
    r = await _get_health(Settings(internal_token=TOKEN, database_url=postgres_url))
    assert r.status_code == 200 and r.json() == {"status": "ok"}


async def test_unavailable_when_postgres_is_unreachable() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql+asyncpg://heros:x@127.0.0.1:{port}/heros"
    r = await _get_health(Settings(internal_token=TOKEN, database_url=url, health_timeout_s=1.0))
    assert r.status_code == 503 and r.json() == {"status": "unavailable"}
