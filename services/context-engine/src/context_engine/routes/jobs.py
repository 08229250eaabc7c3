"""GET /v1/jobs and POST /v1/jobs/{job_id}/retry: the durable job queue, dead letters included."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Path, Query

from context_engine.routes.deps import PG_BIGINT_MAX, RuntimeDep
from context_engine.schemas import JobOut, JobPage

router = APIRouter(tags=["operations"])

JobStatus = Literal["todo", "doing", "succeeded", "failed", "cancelled", "aborting", "aborted"]


@router.get("/jobs", response_model=JobPage, summary="List jobs (status=failed: dead letters)")
async def list_jobs(
    runtime: RuntimeDep,
    status: JobStatus | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=PG_BIGINT_MAX)] = 0,
) -> JobPage:
    jobs = await runtime.jobs.list_jobs(status=status, limit=limit, offset=offset)
    return JobPage.model_validate({"jobs": jobs, "limit": limit, "offset": offset})


@router.post(
    "/jobs/{job_id}/retry",
    response_model=JobOut,
    summary="Queue a dead-lettered (failed) job again",
    responses={404: {"description": "no failed job with this id"}},
)
async def retry_job(
    runtime: RuntimeDep, job_id: Annotated[int, Path(ge=1, le=PG_BIGINT_MAX)]
) -> JobOut:
    if not await runtime.jobs.retry_failed(job_id):
        raise HTTPException(status_code=404, detail=f"no failed job {job_id}")
    (job,) = await runtime.jobs.list_jobs(job_id=job_id)
    return JobOut.model_validate(job)
