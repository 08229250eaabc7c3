"""A running context engine for tests (real app, real PostgreSQL) and a client for it.
Imported by conftest.py and by tests that start engines of their own."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
from asgi_lifespan import LifespanManager
from fastapi import FastAPI

from context_engine.app import create_app
from context_engine.config import Settings
from context_engine.runtime import Runtime

TOKEN = "t" * 32


@dataclass
class Engine:
    """A running context engine (real app, real PostgreSQL) and a client for it."""

    app: FastAPI
    client: httpx.AsyncClient

    @property
    def runtime(self) -> Runtime:
        return self.app.state.runtime

    async def get(self, path: str, **params: object) -> httpx.Response:
        return await self.client.get(path, params=params, headers={"X-Internal-Token": TOKEN})

    async def post(self, path: str) -> httpx.Response:
        return await self.client.post(path, headers={"X-Internal-Token": TOKEN})


async def start_engine(settings: Settings) -> AsyncIterator[Engine]:
    app = create_app(settings)
    transport = httpx.ASGITransport(app=app)
    async with (
        LifespanManager(app, startup_timeout=60, shutdown_timeout=60),
        httpx.AsyncClient(transport=transport, base_url="http://engine") as client,
    ):
        await asyncio.wait_for(app.state.runtime.started.wait(), 60)
        yield Engine(app, client)
