"""The consolidation on demand and its runs, and the tier statistics of the memory."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query, Response

from context_engine.memory.consolidate import get_run, list_runs, tier_stats
from context_engine.routes.deps import PG_BIGINT_MAX, Database, JobsDep, SettingsDep, as_of_or_now
from context_engine.routes.schemas import ConsolidationRunOut, ConsolidationRunPage, TierStats

router = APIRouter(tags=["memory tiers"])

POLL_S = 0.2


@router.post(
    "/consolidate",
    response_model=ConsolidationRunOut,
    status_code=202,
    summary="Run the consolidation now (tiers, salience, communities)",
    responses={
        200: {"description": "wait=true: the run finished (done or failed)"},
        503: {"description": "the job queue is disabled"},
    },
)
async def consolidate(
    db: Database,
    jobs: JobsDep,
    settings: SettingsDep,
    response: Response,
    as_of: Annotated[
        datetime | None,
        Query(description="ISO time to consolidate as of (default now; naive = UTC)"),
    ] = None,
    wait: Annotated[bool, Query(description="answer when the run has finished")] = False,
    timeout_s: Annotated[float, Query(gt=0, le=3600, description="longest wait")] = 300.0,
) -> ConsolidationRunOut:
    if not settings.jobs_enabled:
        raise HTTPException(status_code=503, detail="the job queue is disabled (jobs_enabled)")
    when = as_of_or_now(as_of)
    queued = await jobs.request_consolidation(when)
    deadline = time.monotonic() + timeout_s
    while True:
        async with db.connect() as conn:
            run = await get_run(conn, queued["run_id"])
        assert run is not None
        finished = run["status"] in ("done", "failed")
        if finished or not wait or time.monotonic() >= deadline:
            break
        await asyncio.sleep(POLL_S)
    if finished and wait:
        response.status_code = 200
    return ConsolidationRunOut.model_validate(run)


@router.get("/consolidate/runs", response_model=ConsolidationRunPage, summary="Consolidation runs")
async def get_runs(
    db: Database,
    limit: Annotated[int, Query(ge=1, le=500)] = 20,
    offset: Annotated[int, Query(ge=0, le=PG_BIGINT_MAX)] = 0,
) -> ConsolidationRunPage:
    async with db.connect() as conn:
        runs = await list_runs(conn, limit=limit, offset=offset)
    return ConsolidationRunPage.model_validate({"runs": runs, "limit": limit, "offset": offset})


@router.get(
    "/consolidate/runs/{run_id}",
    response_model=ConsolidationRunOut,
    summary="One consolidation run (progress while it runs)",
    responses={404: {"description": "no such run"}},
)
async def get_one_run(
    db: Database, run_id: Annotated[int, Path(ge=1, le=2**63 - 1)]
) -> ConsolidationRunOut:
    async with db.connect() as conn:
        run = await get_run(conn, run_id)
    if run is None:
        raise HTTPException(status_code=404, detail=f"no consolidation run {run_id}")
    return ConsolidationRunOut.model_validate(run)


@router.get("/tiers/stats", response_model=TierStats, summary="Entities per memory tier")
async def get_tier_stats(
    db: Database,
    recent: Annotated[int, Query(ge=0, le=500, description="latest tier changes listed")] = 20,
) -> TierStats:
    async with db.connect() as conn:
        stats = await tier_stats(conn, recent=recent)
    return TierStats.model_validate(stats)
