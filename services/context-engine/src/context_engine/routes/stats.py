"""GET /v1/stats."""

from __future__ import annotations

from fastapi import APIRouter

from context_engine.routes.deps import EngineStats
from context_engine.routes.schemas import StatsResponse

router = APIRouter(tags=["operations"])


@router.get("/stats", response_model=StatsResponse, summary="What the engine holds")
async def get_stats(stats: EngineStats) -> StatsResponse:
    return StatsResponse.model_validate(await stats())
