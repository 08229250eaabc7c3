"""GET /v1/stats."""

from __future__ import annotations

from fastapi import APIRouter

from context_engine.routes.deps import RuntimeDep
from context_engine.schemas import StatsResponse
from context_engine.stats import engine_stats

router = APIRouter(tags=["operations"])


@router.get("/stats", response_model=StatsResponse, summary="What the engine holds")
async def get_stats(runtime: RuntimeDep) -> StatsResponse:
    async with runtime.db.main.connect() as conn:
        stats = await engine_stats(conn)
    stats["jobs"] = await runtime.jobs.counts()
    index = runtime.search_index
    stats["keyword_index"] = {
        "backend": runtime.settings.keyword_backend,
        "ready": index is not None and index.ready,
        "documents": index.num_docs() if index is not None and index.ready else None,
    }
    graph = runtime.graph
    stats["extraction"] = {
        "extractor": runtime.session_stages.extractor.label,
        "graph_backend": runtime.settings.graph_backend if graph is not None else None,
        "graph_mode": runtime.session_stages.graph_mode if graph is not None else None,
        "graph_open": graph is not None and graph.opened,
    }
    return StatsResponse.model_validate(stats)
