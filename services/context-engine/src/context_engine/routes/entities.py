"""GET /v1/entities, /v1/entities/{id} and its profile: the people, places and things the
memory knows."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Path, Query

from context_engine.knowledge.entities import (
    EntitySearchUnavailable,
    get_entity,
    list_entities,
    nearest_entities,
)
from context_engine.knowledge.profile import entity_profile
from context_engine.routes.deps import (
    PG_BIGINT_MAX,
    Database,
    EntityVectors,
    GraphDep,
    as_of_or_now,
    either,
)
from context_engine.routes.schemas import EntityDetail, EntityPage, EntityProfile, EntitySearchPage

router = APIRouter(tags=["entities"])

EntityId = Annotated[int, Path(ge=1, le=2**63 - 1)]
TypeFilter = Annotated[
    str | None, Query(min_length=1, max_length=64, description="entity type filter")
]
EntityTypeFilter = Annotated[
    str | None, Query(min_length=1, max_length=64, description="as `type` (the design's name)")
]
TierFilter = Annotated[Literal["L0", "L1", "L2"] | None, Query(description="memory tier filter")]


@router.get("/entities", response_model=EntityPage, summary="List entities")
async def get_entities(
    db: Database,
    type: TypeFilter = None,
    entity_type: EntityTypeFilter = None,
    q: Annotated[
        str | None, Query(min_length=1, max_length=200, description="name contains (any case)")
    ] = None,
    contradicted: Annotated[
        bool | None,
        Query(description="only entities with (true) / without (false) a contradicted fact"),
    ] = None,
    tier: TierFilter = None,
    include_history: Annotated[
        bool, Query(description="also entities only older extractor versions mentioned")
    ] = False,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=PG_BIGINT_MAX)] = 0,
) -> EntityPage:
    wanted = either("type", type, "entity_type", entity_type)
    async with db.connect() as conn:
        items, total = await list_entities(
            conn,
            entity_type=wanted,
            limit=limit,
            offset=offset,
            query=q,
            include_history=include_history,
            contradicted=contradicted,
            tier=tier,
        )
    return EntityPage.model_validate(
        {"entities": items, "total": total, "limit": limit, "offset": offset}
    )


@router.get(
    "/entities/search",
    response_model=EntitySearchPage,
    summary="Entities whose meaning is nearest a text (entity vectors)",
    responses={503: {"description": "the vector index is disabled, not open, or failed"}},
)
async def search_entities(
    vectors: EntityVectors,
    query: Annotated[str, Query(min_length=1, max_length=500, description="what to look for")],
    type: TypeFilter = None,
    entity_type: EntityTypeFilter = None,
    tier: TierFilter = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 10,
) -> EntitySearchPage:
    wanted = either("type", type, "entity_type", entity_type)
    try:
        matches = await nearest_entities(
            vectors,
            query,
            limit,
            types=[wanted] if wanted else None,
            tiers=[tier] if tier else None,
        )
    except EntitySearchUnavailable as exc:
        raise HTTPException(status_code=503, detail=str(exc)) from None
    return EntitySearchPage.model_validate(
        {"query": query, "entities": matches, "total": len(matches)}
    )


@router.get(
    "/entities/{entity_id}",
    response_model=EntityDetail,
    summary="One entity with its mentions and contradicted facts",
    responses={404: {"description": "no such entity"}},
)
async def get_one_entity(
    db: Database,
    entity_id: EntityId,
    mentions_limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> EntityDetail:
    async with db.connect() as conn:
        found = await get_entity(conn, entity_id, mentions_limit=mentions_limit)
    if found is None:
        raise HTTPException(status_code=404, detail=f"no entity {entity_id}")
    return EntityDetail.model_validate(found)


@router.get(
    "/entities/{entity_id}/profile",
    response_model=EntityProfile,
    summary="Who or what an entity is: relations, current facts, changes, where it was said",
    responses={404: {"description": "no such entity"}},
)
async def get_entity_profile(
    db: Database,
    graph: GraphDep,
    entity_id: EntityId,
    as_of: Annotated[
        datetime | None, Query(description="ISO time, default now (naive = UTC)")
    ] = None,
    sessions: Annotated[int, Query(ge=1, le=50, description="top sessions listed")] = 5,
) -> EntityProfile:
    when = as_of_or_now(as_of)
    found = await entity_profile(db, graph, entity_id, when, sessions=sessions)
    if found is None:
        raise HTTPException(status_code=404, detail=f"no entity {entity_id}")
    return EntityProfile.model_validate(found)
