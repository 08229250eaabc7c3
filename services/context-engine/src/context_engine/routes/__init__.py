"""The /v1 REST API: thin routes over the modules of the engine. Every route is mounted
through `api_router`, which puts the internal token in front of all of them, then refuses a
query parameter the route does not declare (422 naming it: a misspelt filter must not quietly
answer an unfiltered question)."""

from __future__ import annotations

from fastapi import APIRouter, Depends
from pydantic import SecretStr

from context_engine.routes import (
    check,
    consolidate,
    context,
    daily,
    entities,
    events,
    forget,
    graph,
    ingest,
    jobs,
    memories,
    promises,
    sessions,
    stats,
)
from her_os_shared.auth import AuthFailureHook, require_token
from her_os_shared.query import forbid_unknown_query


def api_router(token: SecretStr | None, on_auth_failure: AuthFailureHook) -> APIRouter:
    # Token first: an unauthenticated request learns nothing about the parameters.
    known = Depends(forbid_unknown_query())
    headers = APIRouter(dependencies=[Depends(require_token(token, on_auth_failure)), known])
    for module in (
        context, entities, graph, ingest, sessions, stats, jobs, consolidate, daily, promises,
        events, forget, check, memories,
    ):  # fmt: skip
        headers.include_router(module.router)
    # A browser's EventSource cannot set headers: the live stream also takes `?token=` or
    # `?x_internal_token=` (compared in constant time; her_os_shared.logging keeps both out
    # of the logs).
    query = APIRouter(
        dependencies=[Depends(require_token(token, on_auth_failure, allow_query=True)), known]
    )
    query.include_router(events.stream_router)
    router = APIRouter(prefix="/v1")
    router.include_router(headers)
    router.include_router(query)
    return router
