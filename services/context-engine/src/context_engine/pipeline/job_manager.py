"""procrastinate's job manager, with retries that cannot wedge the queue.

A retry moves a job back to `todo` under its queueing lock. Only `todo` jobs hold that lock,
so a job of the same key may have been deferred while this one ran (a new ingest, a forget
re-deriving the session); PostgreSQL then refuses the retry (unique queueing lock), the job
stays `doing` for good, and its `lock` keeps the waiting job from ever starting: the stage
never completes (procrastinate issues #1446 and #1543, open upstream; seen here as the embed
stage of a session a forget touched).

Here such a retry is resolved instead of raised:
- the waiting job is the same task with the same arguments: it does the same work (a stage
  job computes what is left when it runs), so the retried job is superseded and deleted; the
  stage row keeps the failed attempt's error until the waiting job runs;
- otherwise the job ends `failed`, a dead letter (`POST /v1/jobs/{id}/retry` once the waiting
  job is gone), rather than `doing` for ever. A failed job retried by hand answers
  `AlreadyEnqueued` naming the waiting job.
"""

from __future__ import annotations

import datetime
from typing import Any

from procrastinate import exceptions, manager
from procrastinate.jobs import Status

from her_os_shared.logging import get_logger

log = get_logger(__name__)

# The job being retried and the job of its queueing lock already waiting in `todo`.
_WAITING = """
SELECT old.status::text AS status, waiting.id AS waiting_id,
       (waiting.task_name = old.task_name AND waiting.args = old.args) AS same_work
FROM procrastinate_jobs old
JOIN procrastinate_jobs waiting
  ON waiting.queueing_lock = old.queueing_lock AND waiting.status = 'todo' AND waiting.id <> old.id
WHERE old.id = %(job_id)s
"""
_DELETE = "DELETE FROM procrastinate_jobs WHERE id = %(job_id)s AND status IN ('doing', 'failed')"


class StageJobManager(manager.JobManager):
    """A `JobManager` whose retries give way to a waiting job of the same queueing lock."""

    async def retry_job_by_id_async(
        self,
        job_id: int,
        retry_at: datetime.datetime,
        priority: int | None = None,
        queue: str | None = None,
        lock: str | None = None,
    ) -> None:
        await self.retry_or_give_way(job_id, retry_at, priority=priority, queue=queue, lock=lock)

    async def retry_or_give_way(
        self,
        job_id: int,
        retry_at: datetime.datetime,
        *,
        priority: int | None = None,
        queue: str | None = None,
        lock: str | None = None,
    ) -> int | None:
        """Retry the job; returns the id of the job that will do its work: its own, or the
        waiting job that supersedes it; None when it became a dead letter instead."""
        try:
            await super().retry_job_by_id_async(
                job_id=job_id, retry_at=retry_at, priority=priority, queue=queue, lock=lock
            )
            return job_id
        except exceptions.UniqueViolation as exc:
            if exc.constraint_name != manager.QUEUEING_LOCK_CONSTRAINT:
                raise
            rows = await self.connector.execute_query_all_async(_WAITING, job_id=job_id)
            if not rows:  # the waiting job started meanwhile: the lock is free again
                await super().retry_job_by_id_async(
                    job_id=job_id, retry_at=retry_at, priority=priority, queue=queue, lock=lock
                )
                return job_id
            return await self._give_way(job_id, rows[0], exc)

    async def _give_way(
        self, job_id: int, row: dict[str, Any], exc: exceptions.UniqueViolation
    ) -> int | None:
        waiting: int = row["waiting_id"]
        if row["same_work"]:
            await self.connector.execute_query_async(_DELETE, job_id=job_id)
            log.info("jobs.retry_superseded", job_id=job_id, waiting_job_id=waiting,
                     queueing_lock=exc.queueing_lock)  # fmt: skip
            return waiting
        if row["status"] == Status.DOING.value:
            await self.finish_job_by_id_async(job_id=job_id, status=Status.FAILED, delete_job=False)
            log.warning("jobs.retry_blocked", job_id=job_id, waiting_job_id=waiting,
                        queueing_lock=exc.queueing_lock, outcome="failed")  # fmt: skip
            return None
        raise exceptions.AlreadyEnqueued(
            f"job {waiting} is already waiting with the queueing lock {exc.queueing_lock}"
        ) from exc
