"""The knowledge graph: an entity's neighbourhood, facts as of a time, graphiti search.
`503` when no graph is configured (CONTEXT_ENGINE_GRAPH_URL) or it does not answer."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Path, Query

from context_engine.graph.base import GraphError
from context_engine.knowledge import graph_view
from context_engine.knowledge.statement_facts import statement_facts
from context_engine.routes.deps import Database, GraphDep, as_of_or_now
from context_engine.routes.schemas import FactPage, GraphEntityResponse

if TYPE_CHECKING:
    from context_engine.graph.knowledge import KnowledgeGraph


router = APIRouter(tags=["graph"])


def _open_graph(graph: GraphDep) -> KnowledgeGraph:
    if graph is None:
        raise HTTPException(
            status_code=503,
            detail="no knowledge graph configured: set CONTEXT_ENGINE_GRAPH_URL",
        )
    if not graph.opened:
        raise HTTPException(status_code=503, detail="the knowledge graph is not reachable yet")
    return graph


if TYPE_CHECKING:  # as GraphDep (deps.py): graphiti is not imported at run time
    OpenGraph = KnowledgeGraph
else:
    OpenGraph = Annotated[Any, Depends(_open_graph)]


def _unavailable(exc: GraphError) -> HTTPException:
    return HTTPException(status_code=503, detail=f"the knowledge graph failed: {exc}"[:300])


@router.get(
    "/graph/entities/{entity_id}",
    response_model=GraphEntityResponse,
    summary="An entity's graph neighbourhood, with facts and where they were said",
    responses={404: {"description": "no such entity"}, 503: {"description": "no graph"}},
)
async def entity_graph(
    db: Database,
    graph: OpenGraph,
    entity_id: Annotated[int, Path(ge=1, le=2**63 - 1)],
    depth: Annotated[int, Query(ge=1, le=3)] = 1,
    limit: Annotated[int, Query(ge=1, le=2000, description="facts at most")] = 500,
) -> GraphEntityResponse:
    try:
        found = await graph_view.entity_graph(db, graph, entity_id, depth=depth, limit=limit)
    except GraphError as exc:
        raise _unavailable(exc) from exc
    if found is None:
        raise HTTPException(status_code=404, detail=f"no entity {entity_id}")
    return GraphEntityResponse.model_validate(found)


@router.get(
    "/facts",
    response_model=FactPage,
    summary="What was true at a time",
    responses={503: {"description": "no graph"}},
)
async def facts(
    db: Database,
    graph: OpenGraph,
    as_of: Annotated[
        datetime | None, Query(description="ISO time, default now (naive = UTC)")
    ] = None,
    subject: Annotated[
        str | None, Query(min_length=1, max_length=200, description="facts about this name")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    history: Annotated[
        bool,
        Query(description="also the facts that had ended by as_of, each with what ended it"),
    ] = False,
) -> FactPage:
    when = as_of_or_now(as_of)
    try:
        items = await graph_view.facts_as_of(
            db, graph, when, subject=subject, limit=limit, history=history
        )
    except GraphError as exc:
        raise _unavailable(exc) from exc
    said = await statement_facts(
        db, when, subjects=[subject] if subject else None, history=history, limit=limit
    )
    return FactPage.model_validate({"as_of": when, "facts": items, "statements": said})


@router.get(
    "/graph/search",
    response_model=FactPage,
    summary="graphiti search over the facts (true as of a time)",
    responses={503: {"description": "no graph"}},
)
async def graph_search(
    db: Database,
    graph: OpenGraph,
    query: Annotated[str, Query(min_length=1, max_length=512)],
    as_of: Annotated[datetime | None, Query(description="ISO time, default now")] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 10,
) -> FactPage:
    if not query.strip():
        raise HTTPException(status_code=422, detail="query is blank")
    when = as_of_or_now(as_of)
    try:
        items = await graph_view.search(db, graph, query, limit=limit, as_of=when)
    except GraphError as exc:
        raise _unavailable(exc) from exc
    return FactPage.model_validate({"as_of": when, "facts": items})
