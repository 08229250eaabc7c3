"""The /v1 REST API: thin routes over the modules of the engine. Every route is mounted
through `api_router`, which puts the internal token in front of all of them."""

from __future__ import annotations

from fastapi import APIRouter, Depends
from pydantic import SecretStr

from context_engine.routes import (
    consolidate,
    context,
    daily,
    entities,
    graph,
    ingest,
    jobs,
    promises,
    sessions,
    stats,
)
from her_os_shared.auth import AuthFailureHook, require_token


def api_router(token: SecretStr | None, on_auth_failure: AuthFailureHook) -> APIRouter:
    router = APIRouter(prefix="/v1", dependencies=[Depends(require_token(token, on_auth_failure))])
    for module in (
        context, entities, graph, ingest, sessions, stats, jobs, consolidate, daily, promises,
    ):  # fmt: skip
        router.include_router(module.router)
    return router
