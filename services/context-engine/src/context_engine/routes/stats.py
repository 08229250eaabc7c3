"""GET /v1/stats."""

from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy import text

from context_engine.routes.deps import RuntimeDep
from context_engine.routes.schemas import StatsResponse
from context_engine.runtime import Runtime
from context_engine.store.stats import engine_stats

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
    stats["vectors"] = await _vectors(runtime)
    stats["degraded"] = (await runtime.health()).degraded
    return StatsResponse.model_validate(stats)


async def _vectors(runtime: Runtime) -> dict[str, object]:
    embedding = runtime.embedding
    if embedding is None:
        return {
            "enabled": False, "space": None, "status": None, "embedded": 0,
            "entities_embedded": 0, "searching": None,
        }  # fmt: skip
    async with runtime.db.main.connect() as conn:
        row = (
            await conn.execute(
                text(
                    "SELECT status, (SELECT count(*) FROM segment_vectors WHERE space = :s)"
                    " AS embedded, (SELECT count(*) FROM entity_vectors WHERE space = :s)"
                    " AS entities FROM vector_spaces WHERE space = :s"
                ),
                {"s": embedding.space_name},
            )
        ).one_or_none()
    return {
        "enabled": True,
        "space": embedding.space_name,
        "searching": embedding.store.name_of(embedding.search_space),
        "status": row.status if row else "unavailable",
        "embedded": int(row.embedded) if row else 0,
        "entities_embedded": int(row.entities) if row else 0,
    }
