"""GET /v1/context: what the memory knows about a query, as of a time."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query

from context_engine.memory.tiers import TIERS, Tier
from context_engine.routes.deps import RetrieverDep, SettingsDep, as_of_or_now
from context_engine.routes.schemas import ContextItem, ContextResponse
from context_engine.search.admission import OverloadedError
from context_engine.search.query import ContextQuery
from context_engine.search.retrieve import AllLegsFailedError, UnknownLegsError

router = APIRouter(tags=["retrieval"])


@router.get("/context", response_model=ContextResponse, summary="Search the memory")
async def get_context(
    retriever: RetrieverDep,
    settings: SettingsDep,
    query: Annotated[str, Query(min_length=1, max_length=512, description="search text")],
    limit: Annotated[int | None, Query(ge=1, le=50, description="results (default 5)")] = None,
    hours_back: Annotated[
        float | None, Query(gt=0, le=24 * 365 * 100, description="window before as_of, hours")
    ] = None,
    as_of: Annotated[
        datetime | None,
        Query(description="ISO time the search is relative to (default now; naive = UTC)"),
    ] = None,
    legs: Annotated[
        str | None,
        Query(
            max_length=64,
            description="comma-separated legs to run (bm25, vector, graph); default: all enabled",
        ),
    ] = None,
    tier: Annotated[
        str | None,
        Query(
            max_length=16,
            description="comma-separated memory tiers (L0, L1, L2) the results must be in; a "
            "segment's tier is the highest tier of the entities it mentions",
        ),
    ] = None,
    me: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=200,
            description='who "I", "me" and "my" in the query are (default: the '
            "configured owner, else the named speaker heard most lately)",
        ),
    ] = None,
) -> ContextResponse:
    if not query.strip():
        raise HTTPException(status_code=422, detail="query: must not be blank")
    chosen = None
    if legs is not None:
        chosen = frozenset(name.strip() for name in legs.split(",") if name.strip())
    tiers: frozenset[Tier] | None = None
    if tier is not None:
        named = {t.strip().upper() for t in tier.split(",") if t.strip()}
        if not named or not named <= set(TIERS):
            raise HTTPException(
                status_code=422, detail=f"tier: {tier!r} is not a list of L0, L1, L2"
            )
        tiers = frozenset(t for t in TIERS if t in named)
    when = as_of_or_now(as_of)
    q = ContextQuery(
        query=query,
        limit=limit or settings.context_default_limit,
        as_of=when,
        hours_back=hours_back,
        legs=chosen,
        tiers=tiers,
        me=me,
    )
    try:
        result = await retriever.retrieve(q)
    except UnknownLegsError as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from None
    except AllLegsFailedError as exc:
        raise HTTPException(status_code=503, detail=str(exc)) from None
    except OverloadedError as exc:
        raise HTTPException(
            status_code=503, detail=str(exc), headers={"Retry-After": str(exc.retry_after_s)}
        ) from None
    return ContextResponse.model_validate(
        {
            "query": query,
            "as_of": when,
            "hours_back": hours_back,
            "tiers": None if tiers is None else [t for t in TIERS if t in tiers],
            "results": [ContextItem.from_result(r) for r in result.results],
            "legs": result.legs,  # name → ok | timeout | error
            "degraded": result.degraded,
            "about": [s.out() for s in result.knowledge.about] if result.knowledge else [],
            "facts": result.knowledge.facts if result.knowledge else [],
            "facts_status": result.knowledge_status,
            "statements": result.knowledge.statements if result.knowledge else [],
        }
    )
