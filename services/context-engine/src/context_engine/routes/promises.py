"""GET /v1/promises and POST /v1/promises/{id}/fulfil (promises.py does the work)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Path, Query

from context_engine.memory.promises import list_promises, mark_fulfilled
from context_engine.routes.deps import PG_BIGINT_MAX, Database
from context_engine.routes.schemas import PromiseOut, PromisePage

router = APIRouter(tags=["promises"])

EntityId = Annotated[int, Path(ge=1, le=2**63 - 1)]


@router.get("/promises", response_model=PromisePage, summary="Promises, open or kept")
async def get_promises(
    db: Database,
    status: Annotated[
        Literal["open", "fulfilled", "all"], Query(description="open, fulfilled or all")
    ] = "open",
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=PG_BIGINT_MAX)] = 0,
) -> PromisePage:
    async with db.connect() as conn:
        items, total = await list_promises(conn, status=status, limit=limit, offset=offset)
    return PromisePage.model_validate(
        {"promises": items, "total": total, "limit": limit, "offset": offset}
    )


@router.post(
    "/promises/{entity_id}/fulfil",
    response_model=PromiseOut,
    summary="Mark a promise kept by hand (a promise already kept is left as it is)",
    responses={404: {"description": "no such promise"}},
)
async def fulfil_promise(db: Database, entity_id: EntityId) -> PromiseOut:
    item, _ = await mark_fulfilled(db, entity_id)
    if item is None:
        raise HTTPException(status_code=404, detail=f"no promise {entity_id}")
    return PromiseOut.model_validate(item)
