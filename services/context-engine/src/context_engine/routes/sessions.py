"""GET /v1/sessions and /v1/sessions/{session_id}."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query

from context_engine.ingest import sessions
from context_engine.routes.deps import PG_BIGINT_MAX, Database, SessionIdPath
from context_engine.routes.schemas import SessionDetail, SessionPage

router = APIRouter(tags=["sessions"])


@router.get("/sessions", response_model=SessionPage, summary="List sessions, newest first")
async def list_sessions(
    db: Database,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=PG_BIGINT_MAX)] = 0,
    since: Annotated[datetime | None, Query(description="started at or after")] = None,
    until: Annotated[datetime | None, Query(description="started before")] = None,
) -> SessionPage:
    async with db.connect() as conn:
        items, total = await sessions.list_sessions(
            conn, limit=limit, offset=offset, since=since, until=until
        )
    return SessionPage.model_validate(
        {"sessions": items, "total": total, "limit": limit, "offset": offset}
    )


@router.get(
    "/sessions/{session_id}",
    response_model=SessionDetail,
    summary="A session with its segments and stage states",
    responses={404: {"description": "no such session"}},
)
async def get_session(
    db: Database,
    session_id: SessionIdPath,
    include_replaced: Annotated[
        bool, Query(description="also list fast-path segments a sweep replaced")
    ] = False,
    offset: Annotated[
        int, Query(ge=0, le=PG_BIGINT_MAX, description="first segment to list (0-based)")
    ] = 0,
    limit: Annotated[
        int | None, Query(ge=1, le=1000, description="segments to list at most (default all)")
    ] = None,
) -> SessionDetail:
    async with db.connect() as conn:
        found = await sessions.get_session(
            conn, session_id, include_replaced=include_replaced, offset=offset, limit=limit
        )
    if found is None:
        raise HTTPException(status_code=404, detail=f"no session {session_id}")
    return SessionDetail.model_validate(found)
