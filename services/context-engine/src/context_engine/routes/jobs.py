"""GET /v1/jobs and POST /v1/jobs/{job_id}/retry: the durable job queue, dead letters included."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Path, Query
from procrastinate.exceptions import AlreadyEnqueued

from context_engine.routes.deps import PG_BIGINT_MAX, JobsDep
from context_engine.routes.schemas import JobOut, JobPage

router = APIRouter(tags=["operations"])

JobStatus = Literal["todo", "doing", "succeeded", "failed", "cancelled", "aborting", "aborted"]


@router.get("/jobs", response_model=JobPage, summary="List jobs (status=failed: dead letters)")
async def list_jobs(
    jobs: JobsDep,
    status: JobStatus | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=PG_BIGINT_MAX)] = 0,
) -> JobPage:
    found = await jobs.list_jobs(status=status, limit=limit, offset=offset)
    return JobPage.model_validate({"jobs": found, "limit": limit, "offset": offset})


@router.post(
    "/jobs/{job_id}/retry",
    response_model=JobOut,
    summary="Queue a dead-lettered (failed) job again",
    responses={
        404: {"description": "no failed job with this id"},
        409: {"description": "another job of its queueing lock is waiting; retry once it ran"},
    },
)
async def retry_job(jobs: JobsDep, job_id: Annotated[int, Path(ge=1, le=PG_BIGINT_MAX)]) -> JobOut:
    """The job now queued: the same one, or the job of the same task and arguments that was
    already waiting (the failed one is then superseded and removed)."""
    try:
        queued = await jobs.retry_failed(job_id)
    except AlreadyEnqueued as exc:
        raise HTTPException(status_code=409, detail=str(exc)) from exc
    if queued is None:
        raise HTTPException(status_code=404, detail=f"no failed job {job_id}")
    found = await jobs.list_jobs(job_id=queued)
    if not found:  # the waiting job ran and was cleaned up meanwhile
        raise HTTPException(status_code=404, detail=f"no failed job {job_id}")
    return JobOut.model_validate(found[0])
