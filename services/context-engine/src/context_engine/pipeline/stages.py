"""Durable state of a session's downstream stages (`session_stages`).

The idempotency key of a stage run is (session, stage, stage version, input fingerprint): a
job finding the same key already `done` returns at once, so a re-delivered or re-deferred
job never repeats work, while new input (more segments) or a new stage version runs again.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from context_engine.store.models import SessionStage

QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"


@dataclass(frozen=True, slots=True)
class StageKey:
    session_id: str
    stage: str
    version: int

    @property
    def lock(self) -> str:
        """procrastinate queueing lock: one queued job per key at a time."""
        return f"{self.stage}:v{self.version}:{self.session_id}"


async def is_done(conn: AsyncConnection, key: StageKey, fingerprint: str) -> bool:
    t = SessionStage.__table__
    row = (
        await conn.execute(
            select(t).where(t.c.session_id == key.session_id, t.c.stage == key.stage)
        )
    ).one_or_none()
    # `input_fingerprint` is only written when a run completes, and carries the version, so
    # later queued/running/failed states do not hide what was last done.
    return (
        row is not None
        and row.completed_at is not None
        and row.input_fingerprint == _versioned(key, fingerprint)
    )


def _versioned(key: StageKey, fingerprint: str) -> str:
    return f"v{key.version}:{fingerprint}"


async def mark(
    conn: AsyncConnection,
    key: StageKey,
    status: str,
    *,
    fingerprint: str | None = None,
    attempts: int | None = None,
    error: str | None = None,
    job_id: int | None = None,
) -> None:
    values: dict[str, object] = {
        "stage_version": key.version,
        "status": status,
        "updated_at": func.now(),
        "last_error": error,
    }
    if fingerprint is not None:
        values["input_fingerprint"] = _versioned(key, fingerprint)
    if attempts is not None:
        values["attempts"] = attempts
    if job_id is not None:
        values["job_id"] = job_id
    if status == DONE and fingerprint is not None:
        values["completed_at"] = func.now()
    stmt = pg_insert(SessionStage).values(session_id=key.session_id, stage=key.stage, **values)
    stmt = stmt.on_conflict_do_update(
        index_elements=[SessionStage.session_id, SessionStage.stage], set_=values
    )
    await conn.execute(stmt)


async def mark_queued(conn: AsyncConnection, key: StageKey, job_id: int) -> None:
    """The stage is queued as job `job_id` — unless that job already started: a fast worker
    can pick the job up (and even finish it) before the deferrer records it as queued."""
    values: dict[str, object] = {
        "stage_version": key.version,
        "status": QUEUED,
        "updated_at": func.now(),
        "last_error": None,
        "job_id": job_id,
    }
    stmt = pg_insert(SessionStage).values(session_id=key.session_id, stage=key.stage, **values)
    stmt = stmt.on_conflict_do_update(
        index_elements=[SessionStage.session_id, SessionStage.stage],
        set_=values,
        where=SessionStage.job_id.is_distinct_from(job_id),
    )
    await conn.execute(stmt)


async def mark_failure(
    engine: AsyncEngine, key: StageKey, *, attempts: int, error: str, final: bool, job_id: int
) -> None:
    """Record a failed attempt in its own transaction (the stage's one was rolled back).
    `final` means retries are exhausted: the stage is dead-lettered (`failed`)."""
    async with engine.begin() as conn:
        await mark(
            conn,
            key,
            FAILED if final else QUEUED,
            attempts=attempts,
            error=error[:2000],
            job_id=job_id,
        )
