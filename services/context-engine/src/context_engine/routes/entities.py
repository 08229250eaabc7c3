"""GET /v1/entities: the people, places and things the memory knows."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from context_engine.entities import list_entities
from context_engine.routes.deps import RuntimeDep
from context_engine.schemas import EntityPage

router = APIRouter(tags=["entities"])


@router.get("/entities", response_model=EntityPage, summary="List entities")
async def get_entities(
    runtime: RuntimeDep,
    type: Annotated[
        str | None, Query(min_length=1, max_length=64, description="entity type filter")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> EntityPage:
    async with runtime.db.main.connect() as conn:
        items, total = await list_entities(conn, entity_type=type, limit=limit, offset=offset)
    return EntityPage.model_validate(
        {"entities": items, "total": total, "limit": limit, "offset": offset}
    )
