"""Durable jobs (procrastinate, schema "procrastinate"): session finalisation, its idempotency,
retries with backoff, dead letters and their retry, and the rescue of stalled jobs.

The real app and worker on a real PostgreSQL. Every wait polls against a generous deadline.
The watcher is slowed down (module `settings`) so files are ingested only when a test asks.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import procrastinate
import pytest
from engine_harness import Engine, eventually, ingest
from procrastinate.jobs import Job
from sqlalchemy import text

from context_engine.config import Settings
from context_engine.pipeline import stages
from context_engine.pipeline.jobs import JobRetry
from context_engine.pipeline.stages import StageKey
from her_os_shared.jsonl import append_records
from her_os_shared.retry import Backoff
from her_os_shared.transcript import Segment, TranscriptPayload

T0 = datetime(2025, 6, 1, 10, 0, tzinfo=UTC)  # long past: sessions are finalised at once


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """conftest's settings, with the watcher too slow to ingest anything during a test, and
    the periodic idle-session scan (every minute) off: a test calls `scan_idle()` itself, so
    no scan at a minute boundary queues a finalisation a test does not expect."""
    return settings.model_copy(
        update={
            "watch_debounce_s": 300.0,
            "watch_max_delay_s": 300.0,
            "reconcile_interval_s": 3600.0,
            "idle_scan_cron": "0 0 29 2 *",  # 29 February, midnight: not during a test
        }
    )


# --- helpers ---


def seg(segment_id: str, start: float, end: float) -> Segment:
    return Segment(
        segment_id=segment_id,
        speaker="alice",
        text=f"words of {segment_id}",
        start=start,
        end=end,
        stt_engine="test",
    )


def write(settings: Settings, session_id: str, *segments: Segment) -> Path:
    payload = TranscriptPayload(
        session_id=session_id, device_id="dev1", session_started_at=T0, segments=list(segments)
    )
    return append_records(settings.transcripts_dir, session_id, [payload])


async def query(engine: Engine, sql: str, **params: object) -> list[dict[str, Any]]:
    async with engine.runtime.db.main.connect() as conn:
        return [dict(r._mapping) for r in await conn.execute(text(sql), params)]


async def session_row(engine: Engine, session_id: str) -> dict[str, Any]:
    (row,) = await query(engine, "SELECT * FROM sessions WHERE session_id = :s", s=session_id)
    return row


async def stage_row(engine: Engine, session_id: str, stage: str) -> dict[str, Any] | None:
    rows = await query(
        engine,
        "SELECT * FROM session_stages WHERE session_id = :s AND stage = :st",
        s=session_id,
        st=stage,
    )
    return rows[0] if rows else None


async def job_row(engine: Engine, job_id: int) -> dict[str, Any]:
    (row,) = await query(
        engine,
        "SELECT id, status::text AS status, attempts, task_name, worker_id"
        " FROM procrastinate.procrastinate_jobs WHERE id = :id",
        id=job_id,
    )
    return row


async def finalise_jobs(engine: Engine, session_id: str) -> list[dict[str, Any]]:
    return await query(
        engine,
        "SELECT id, status::text AS status, attempts FROM procrastinate.procrastinate_jobs"
        " WHERE task_name = 'finalise_session' AND args->>'session_id' = :s ORDER BY id",
        s=session_id,
    )


async def wait_job(engine: Engine, job_id: int, status: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        row = await job_row(engine, job_id)
        return row if row["status"] == status else None

    return await eventually(check, f"job {job_id} to be {status}")


async def wait_finalised(engine: Engine, session_id: str, count: int) -> dict[str, Any]:
    """Wait until the session is ended with `count` segments and its stage row is done."""

    async def check() -> dict[str, Any] | None:
        row = await session_row(engine, session_id)
        stage = await stage_row(engine, session_id, "finalise")
        if row["ended_at"] is None or row["segments_count"] != count:
            return None
        if stage is None or stage["status"] != stages.DONE:
            return None
        return row

    return await eventually(check, f"session {session_id} finalised with {count} segments")


async def wait_jobs_idle(engine: Engine, session_id: str) -> list[dict[str, Any]]:
    async def check() -> list[dict[str, Any]] | None:
        jobs = await finalise_jobs(engine, session_id)
        return jobs if jobs and all(j["status"] == "succeeded" for j in jobs) else None

    return await eventually(check, f"finalise jobs of {session_id} to be done")


async def finalise_events(engine: Engine, session_id: str) -> int:
    await engine.runtime.chronicler.flush()  # events are written in batches
    async with engine.runtime.db.events.connect() as conn:
        return (
            await conn.execute(
                text(
                    "SELECT count(*) FROM observability_events WHERE creature = 'ouroboros'"
                    " AND event_type = 'complete' AND session_id = :s"
                    " AND data->>'stage' = 'finalise'"
                ),
                {"s": session_id},
            )
        ).scalar_one()


async def _at_least(items: list[Any], n: int) -> bool | None:
    return True if len(items) >= n else None


# --- finalisation ---


async def test_an_old_session_is_finalised_by_a_durable_job(
    engine: Engine, settings: Settings
) -> None:
    write(settings, "s1", seg("g1", 0, 2), seg("g2", 2, 5), seg("g3", 5, 9.5))
    await ingest(engine, "s1")

    row = await wait_finalised(engine, "s1", 3)
    assert row["ended_at"] == T0 + timedelta(seconds=9.5)
    assert row["last_spoken_at"] == T0 + timedelta(seconds=9.5)
    stage = await stage_row(engine, "s1", "finalise")
    assert stage is not None
    assert stage["stage_version"] == 1 and stage["attempts"] == 1
    assert stage["last_error"] is None and stage["completed_at"] is not None
    assert stage["input_fingerprint"]
    (job,) = await wait_jobs_idle(engine, "s1")
    assert stage["job_id"] == job["id"]
    assert await finalise_events(engine, "s1") == 1

    detail = (await engine.get("/v1/sessions/s1")).json()
    assert detail["status"] == "ended" and detail["segments_count"] == 3
    stages_now = {s["stage"]: s["status"] for s in detail["stages"]}
    assert stages_now["finalise"] == "done"
    # finalisation queues extraction; ingestion queued embedding
    assert set(stages_now) <= {"finalise", "extract", "embed"}
    jobs = (await engine.get("/v1/jobs", status="succeeded")).json()["jobs"]
    assert job["id"] in {j["id"] for j in jobs}
    listed = next(j for j in jobs if j["id"] == job["id"])
    assert listed["task_name"] == "finalise_session" and listed["args"] == {"session_id": "s1"}
    assert listed["queueing_lock"] == "finalise:v1:s1"


async def test_a_re_deferred_finalise_for_unchanged_input_is_skipped(
    engine: Engine, settings: Settings
) -> None:
    write(settings, "s1", seg("g1", 0, 2), seg("g2", 2, 5))
    await ingest(engine, "s1")
    await wait_finalised(engine, "s1", 2)
    await wait_jobs_idle(engine, "s1")
    before_stage = await stage_row(engine, "s1", "finalise")
    before_session = await session_row(engine, "s1")

    jobs = engine.runtime.jobs
    outcomes: list[str] = []
    real = jobs._finalise

    async def spy(key: StageKey) -> str:
        outcome = await real(key)
        outcomes.append(outcome)
        return outcome

    jobs._finalise = spy  # type: ignore[method-assign]
    job_id = await jobs.defer_finalise("s1")
    assert job_id is not None
    await wait_job(engine, job_id, "succeeded")

    assert outcomes == ["already_done"]
    after_stage = await stage_row(engine, "s1", "finalise")
    assert after_stage is not None and before_stage is not None
    assert after_stage["status"] == stages.DONE
    assert after_stage["completed_at"] == before_stage["completed_at"]
    assert after_stage["input_fingerprint"] == before_stage["input_fingerprint"]
    assert (await session_row(engine, "s1"))["updated_at"] == before_session["updated_at"]
    assert await finalise_events(engine, "s1") == 1


async def test_a_re_deferred_finalise_for_unchanged_input_changes_nothing(
    engine: Engine, settings: Settings
) -> None:
    """Running finalise again changes nothing visible."""
    write(settings, "s1", seg("g1", 0, 2), seg("g2", 2, 5))
    await ingest(engine, "s1")
    await wait_finalised(engine, "s1", 2)
    await wait_jobs_idle(engine, "s1")
    before = await session_row(engine, "s1")
    before_stage = await stage_row(engine, "s1", "finalise")
    assert before_stage is not None

    job_id = await engine.runtime.jobs.defer_finalise("s1")
    assert job_id is not None
    await wait_job(engine, job_id, "succeeded")
    after = await wait_finalised(engine, "s1", 2)
    assert after["ended_at"] == before["ended_at"] == T0 + timedelta(seconds=5)
    after_stage = await stage_row(engine, "s1", "finalise")
    assert after_stage is not None and after_stage["job_id"] == job_id
    assert after_stage["input_fingerprint"] == before_stage["input_fingerprint"]


async def test_a_stage_is_queued_at_most_once_per_key(engine: Engine, settings: Settings) -> None:
    write(settings, "s1", seg("g1", 0, 2))
    await ingest(engine, "s1")
    await wait_finalised(engine, "s1", 1)
    await wait_jobs_idle(engine, "s1")

    async def lock_free() -> bool | None:  # the stages after finalise (extract) hold it too
        (row,) = await query(
            engine,
            "SELECT count(*) AS busy FROM procrastinate.procrastinate_jobs"
            " WHERE lock = 'session:s1' AND status IN ('todo', 'doing')",
        )
        return True if row["busy"] == 0 else None

    await eventually(lock_free, "no job of s1 holding its lock")

    # Hold the session's job lock with a job 'doing' on the live worker, so that new jobs of
    # the session stay queued ('todo') while the test looks.
    async with engine.runtime.db.main.begin() as conn:
        worker = (
            await conn.execute(
                text(
                    "SELECT id FROM procrastinate.procrastinate_workers"
                    " ORDER BY last_heartbeat DESC LIMIT 1"
                )
            )
        ).scalar_one()
        blocker = (
            await conn.execute(
                text(
                    "INSERT INTO procrastinate.procrastinate_jobs"
                    " (queue_name, task_name, lock, args, status, worker_id)"
                    " VALUES ('default', 'lock_holder', 'session:s1', '{}', 'doing', :w)"
                    " RETURNING id"
                ),
                {"w": worker},
            )
        ).scalar_one()

    first = await engine.runtime.jobs.defer_finalise("s1")
    second = await engine.runtime.jobs.defer_finalise("s1")
    assert first is not None and second is None  # the queueing lock of (finalise, v1, s1)
    await asyncio.sleep(0.5)
    assert (await job_row(engine, first))["status"] == "todo"
    stage = await stage_row(engine, "s1", "finalise")
    assert stage is not None and stage["status"] == stages.QUEUED and stage["job_id"] == first

    async with engine.runtime.db.main.begin() as conn:
        # (procrastinate's triggers name its types unqualified: they need its search_path)
        await conn.execute(text("SET LOCAL search_path TO procrastinate, public"))
        await conn.execute(
            text("UPDATE procrastinate_jobs SET status = 'succeeded' WHERE id = :id"),
            {"id": blocker},
        )
    await wait_job(engine, first, "succeeded")
    await wait_finalised(engine, "s1", 1)
    assert [j["id"] for j in await finalise_jobs(engine, "s1")][-1] == first
    assert len(await finalise_jobs(engine, "s1")) == 2


async def test_new_segments_reopen_the_session_and_it_is_finalised_again(
    engine: Engine, settings: Settings
) -> None:
    write(settings, "s1", seg("g1", 0, 2), seg("g2", 2, 5))
    await ingest(engine, "s1")
    await wait_finalised(engine, "s1", 2)
    await wait_jobs_idle(engine, "s1")
    first_stage = await stage_row(engine, "s1", "finalise")
    assert first_stage is not None

    # Hold the "segments written" callback so the re-opened state can be seen before the
    # engine queues finalisation again.
    changed: list[str] = []

    async def hold(session_id: str) -> None:
        changed.append(session_id)

    engine.runtime.ingestor.on_session = hold
    write(settings, "s1", seg("g3", 20, 24.25), seg("g4", 30, 31))
    result = await ingest(engine, "s1")
    assert result["segments"] == 2 and changed == ["s1"]

    detail = (await engine.get("/v1/sessions/s1")).json()
    assert detail["status"] == "open" and detail["ended_at"] is None
    assert detail["segments_count"] == 4
    assert (await session_row(engine, "s1"))["ended_at"] is None

    await engine.runtime.jobs.session_changed("s1")
    row = await wait_finalised(engine, "s1", 4)
    assert row["ended_at"] == T0 + timedelta(seconds=31)
    stage = await stage_row(engine, "s1", "finalise")
    assert stage is not None
    assert stage["input_fingerprint"] != first_stage["input_fingerprint"]
    assert stage["completed_at"] > first_stage["completed_at"]
    jobs = await wait_jobs_idle(engine, "s1")
    assert len(jobs) == 2 and stage["job_id"] == jobs[-1]["id"]
    assert await finalise_events(engine, "s1") == 2
    detail = (await engine.get("/v1/sessions/s1")).json()
    assert detail["status"] == "ended" and detail["segments_count"] == 4


async def test_the_idle_scan_finalises_silent_sessions(engine: Engine, settings: Settings) -> None:
    changed: list[str] = []

    async def hold(session_id: str) -> None:  # no finalisation on ingestion
        changed.append(session_id)

    engine.runtime.ingestor.on_session = hold
    for sid in ("a", "b"):
        write(settings, sid, seg("g1", 0, 1), seg("g2", 1, 2.5))
        await ingest(engine, sid)
    assert changed == ["a", "b"]
    assert await finalise_jobs(engine, "a") == []
    stats = (await engine.get("/v1/stats")).json()
    assert stats["sessions"] == {"total": 2, "open": 2, "ended": 0}

    assert await engine.runtime.jobs.scan_idle() == 2
    for sid in ("a", "b"):
        row = await wait_finalised(engine, sid, 2)
        assert row["ended_at"] == T0 + timedelta(seconds=2.5)
        assert len(await wait_jobs_idle(engine, sid)) == 1
    assert await engine.runtime.jobs.scan_idle() == 0  # nothing open any more


# --- retries, dead letters ---


@dataclass
class FailingStage:
    """A test double stage: its body raises while `fail` is set, else records success."""

    key: StageKey
    fail: bool = True
    calls: list[StageKey] = field(default_factory=list)


async def dead_letter(engine: Engine, settings: Settings) -> tuple[FailingStage, int]:
    """Register `always_failing_stage` on the engine's queue, defer it for session s1 and
    wait until its retries are spent (procrastinate status `failed`). Returns the double and
    the job id."""
    runtime = engine.runtime
    write(settings, "s1", seg("g1", 0, 2))
    await ingest(engine, "s1")  # the stage row needs its session
    await wait_finalised(engine, "s1", 1)
    await wait_jobs_idle(engine, "s1")
    double = FailingStage(StageKey("s1", "always_failing", 1))

    async def body(k: StageKey) -> str:
        double.calls.append(k)
        if double.fail:
            raise RuntimeError(f"boom {len(double.calls)}")
        async with runtime.db.main.begin() as conn:  # a stage body records its own success
            await stages.mark(conn, k, stages.DONE, fingerprint="fp")
        return "done"

    @runtime.jobs.app.task(name="always_failing_stage", retry=runtime.jobs.retry, pass_context=True)
    async def always_failing_stage(context: procrastinate.JobContext, session_id: str) -> str:
        assert context.job is not None
        key = StageKey(session_id, double.key.stage, double.key.version)
        return await runtime.jobs.run_stage(context.job, key, body)

    job_id = await runtime.jobs.defer_stage("always_failing_stage", double.key, session_id="s1")
    assert job_id is not None
    await wait_job(engine, job_id, "failed")
    return double, job_id


async def test_a_failing_stage_is_retried_then_dead_lettered(
    engine: Engine, settings: Settings
) -> None:
    max_attempts = settings.job_max_attempts
    assert max_attempts == 3
    double, job_id = await dead_letter(engine, settings)
    assert len(double.calls) == max_attempts
    job = await job_row(engine, job_id)
    assert job["attempts"] == max_attempts  # procrastinate counts every finished run
    await asyncio.sleep(0.5)
    assert len(double.calls) == max_attempts  # and nothing runs it again

    stage = await stage_row(engine, "s1", "always_failing")
    assert stage is not None
    assert stage["status"] == stages.FAILED and stage["attempts"] == max_attempts
    assert stage["last_error"] == f"RuntimeError('boom {max_attempts}')"
    assert stage["job_id"] == job_id and stage["completed_at"] is None

    dead = (await engine.get("/v1/jobs", status="failed")).json()
    assert [j["id"] for j in dead["jobs"]] == [job_id]
    (listed,) = dead["jobs"]
    assert listed["task_name"] == "always_failing_stage" and listed["status"] == "failed"
    assert listed["args"] == {"session_id": "s1"} and listed["attempts"] == max_attempts
    assert listed["queueing_lock"] == "always_failing:v1:s1"
    assert listed["updated_at"] is not None
    stats = (await engine.get("/v1/stats")).json()
    assert stats["jobs"]["failed"] == 1 and stats["stages_failed"] == 1
    detail = (await engine.get("/v1/sessions/s1")).json()
    by_stage = {s["stage"]: s for s in detail["stages"]}
    assert by_stage["always_failing"]["status"] == "failed"
    assert by_stage["always_failing"]["attempts"] == max_attempts
    assert by_stage["always_failing"]["last_error"].startswith("RuntimeError")
    assert by_stage["finalise"]["status"] == "done"  # one stage's failure is its own

    # Each failed attempt was an ouroboros (ingest) error event; the last says dead letter.
    await engine.runtime.chronicler.flush()  # events are written in batches
    async with engine.runtime.db.events.connect() as conn:
        events = (
            await conn.execute(
                text(
                    "SELECT data FROM observability_events WHERE creature = 'ouroboros'"
                    " AND event_type = 'error' AND data->>'stage' = 'always_failing'"
                    " ORDER BY (data->>'attempt')::int"
                )
            )
        ).scalars()
        attempts = [(e["attempt"], e["dead_letter"]) for e in events]
    assert attempts == [(1, False), (2, False), (3, True)]


async def test_a_dead_letter_can_be_retried_by_hand(engine: Engine, settings: Settings) -> None:
    max_attempts = settings.job_max_attempts
    double, job_id = await dead_letter(engine, settings)

    # Not retryable: a job that is not failed, or no job at all.
    finalise_id = (await finalise_jobs(engine, "s1"))[0]["id"]
    assert (await engine.post(f"/v1/jobs/{finalise_id}/retry")).status_code == 404
    assert (await engine.post("/v1/jobs/987654321/retry")).status_code == 404

    # Retried by hand while the cause persists: one more run (its retries are spent), and
    # it is a dead letter again.
    r = await engine.post(f"/v1/jobs/{job_id}/retry")
    assert r.status_code == 200, r.text
    assert r.json()["id"] == job_id and r.json()["status"] in ("todo", "doing", "failed")
    await eventually(
        lambda: _at_least(double.calls, max_attempts + 1), "the hand-retried job to run"
    )
    await wait_job(engine, job_id, "failed")
    await asyncio.sleep(0.5)
    assert len(double.calls) == max_attempts + 1
    stage = await stage_row(engine, "s1", "always_failing")
    assert stage is not None and stage["status"] == stages.FAILED
    assert stage["attempts"] > max_attempts

    # The cause is fixed: retry the dead letter by hand again.
    double.fail = False
    r = await engine.post(f"/v1/jobs/{job_id}/retry")
    assert r.status_code == 200, r.text
    assert r.json()["id"] == job_id and r.json()["status"] in ("todo", "doing", "succeeded")
    await wait_job(engine, job_id, "succeeded")
    assert len(double.calls) == max_attempts + 2
    stage = await stage_row(engine, "s1", "always_failing")
    assert stage is not None
    assert stage["status"] == stages.DONE and stage["last_error"] is None
    assert stage["attempts"] > max_attempts and stage["completed_at"] is not None
    stats = (await engine.get("/v1/stats")).json()
    assert stats["jobs"]["failed"] == 0 and stats["stages_failed"] == 0
    assert (await engine.get("/v1/jobs", status="failed")).json()["jobs"] == []
    # Succeeded now: it cannot be retried again.
    assert (await engine.post(f"/v1/jobs/{job_id}/retry")).status_code == 404


async def test_a_retry_gives_way_to_a_job_of_the_same_key_deferred_meanwhile(
    engine: Engine, settings: Settings
) -> None:
    # A stage job fails while a job of the same key was queued during its run (a new ingest,
    # a forget re-deriving the session): procrastinate's retry collides with the waiting
    # job's queueing lock. The failed job must not stay 'doing' (its lock would keep the
    # waiting one from ever starting): it gives way, and the waiting job does the work.
    runtime = engine.runtime
    write(settings, "s1", seg("g1", 0, 2))
    await ingest(engine, "s1")
    await wait_finalised(engine, "s1", 1)
    key = StageKey("s1", "racy", 1)
    calls: list[int] = []

    async def body(k: StageKey) -> str:
        calls.append(len(calls))
        if len(calls) == 1:
            assert await runtime.jobs.defer_stage("racy_stage", key, session_id="s1") is not None
            raise RuntimeError("the session changed under me")
        async with runtime.db.main.begin() as conn:
            await stages.mark(conn, k, stages.DONE, fingerprint="fp")
        return "done"

    @runtime.jobs.app.task(name="racy_stage", retry=runtime.jobs.retry, pass_context=True)
    async def racy_stage(context: procrastinate.JobContext, session_id: str) -> str:
        assert context.job is not None
        return await runtime.jobs.run_stage(context.job, key, body)

    first = await runtime.jobs.defer_stage("racy_stage", key, session_id="s1")
    assert first is not None

    async def stage_done() -> dict[str, Any] | None:
        row = await stage_row(engine, "s1", "racy")
        return row if row is not None and row["status"] == stages.DONE else None

    done = await eventually(stage_done, "the waiting job to complete the stage")
    assert calls == [0, 1] and done["last_error"] is None
    jobs = await query(
        engine,
        "SELECT id, status::text AS status FROM procrastinate.procrastinate_jobs"
        " WHERE task_name = 'racy_stage' ORDER BY id",
    )
    # The failed run was superseded (deleted) by the waiting job, which succeeded.
    assert [j["id"] for j in jobs] == [done["job_id"]] and done["job_id"] != first
    assert jobs[0]["status"] == "succeeded"


async def test_a_retry_blocked_by_other_work_becomes_a_dead_letter(engine: Engine) -> None:
    # The job waiting under the same queueing lock has other arguments (not the same work):
    # the failed job ends 'failed' (retryable by hand), never stuck 'doing'.
    runtime = engine.runtime
    ran: list[str] = []
    waiting: list[int] = []

    def queued(**options: Any) -> Any:
        return runtime.jobs.app.configure_task("noted_task", queueing_lock="q", **options)

    @runtime.jobs.app.task(name="noted_task", retry=runtime.jobs.retry)
    async def noted_task(note: str) -> None:
        ran.append(note)
        if ran == ["first"]:  # deferred while this one runs, due in an hour: it waits
            waiting.append(await queued(schedule_in={"hours": 1}).defer_async(note="second"))
            raise RuntimeError("boom")

    first = await queued().defer_async(note="first")
    await wait_job(engine, first, "failed")
    assert (await job_row(engine, first))["attempts"] == 1

    # By hand, while the other job of its queueing lock waits: 409 naming it, nothing changed.
    r = await engine.post(f"/v1/jobs/{first}/retry")
    assert r.status_code == 409 and f"job {waiting[0]}" in r.json()["detail"], r.text
    assert (await job_row(engine, first))["status"] == "failed"
    # Once nothing of its lock waits, it is queued again and runs.
    assert await runtime.jobs.app.job_manager.cancel_job_by_id_async(waiting[0])
    r = await engine.post(f"/v1/jobs/{first}/retry")
    assert r.status_code == 200 and r.json()["id"] == first, r.text
    await wait_job(engine, first, "succeeded")
    assert ran == ["first", "first"]


async def test_a_dead_letter_retried_by_hand_gives_way_to_the_same_work_waiting(
    engine: Engine, settings: Settings
) -> None:
    double, job_id = await dead_letter(engine, settings)
    runtime = engine.runtime
    waiting = await runtime.jobs.app.configure_task(
        "always_failing_stage", queueing_lock=double.key.lock, schedule_in={"hours": 1}
    ).defer_async(session_id="s1")
    r = await engine.post(f"/v1/jobs/{job_id}/retry")
    assert r.status_code == 200, r.text
    assert r.json()["id"] == waiting and r.json()["status"] == "todo"
    gone = await query(
        engine, "SELECT id FROM procrastinate.procrastinate_jobs WHERE id = :id", id=job_id
    )
    assert gone == []  # superseded by the waiting job


async def test_retry_rejects_malformed_job_ids(engine: Engine) -> None:
    for bad in ("0", "-1", "abc", "1.5"):
        assert (await engine.post(f"/v1/jobs/{bad}/retry")).status_code == 422, bad


async def test_jobs_listing_filters_and_pages(engine: Engine, settings: Settings) -> None:
    for sid in ("a", "b", "c"):
        write(settings, sid, seg("g1", 0, 1))
        await ingest(engine, sid)
    for sid in ("a", "b", "c"):
        await wait_finalised(engine, sid, 1)
        await wait_jobs_idle(engine, sid)

    everything = (await engine.get("/v1/jobs", limit=500)).json()
    assert everything["limit"] == 500 and everything["offset"] == 0
    ids = [j["id"] for j in everything["jobs"]]
    assert ids == sorted(ids, reverse=True)  # newest first
    finalising = [j for j in everything["jobs"] if j["task_name"] == "finalise_session"]
    assert len(finalising) == 3
    page = (await engine.get("/v1/jobs", status="succeeded", limit=1, offset=1)).json()
    assert len(page["jobs"]) == 1 and page["jobs"][0]["status"] == "succeeded"
    assert (await engine.get("/v1/jobs", status="failed")).json()["jobs"] == []
    assert (await engine.get("/v1/jobs", status="bogus")).status_code == 422
    assert (await engine.get("/v1/jobs", limit=0)).status_code == 422


# --- stalled jobs ---


async def test_a_job_stalled_by_a_dead_worker_is_rescued(engine: Engine) -> None:
    runtime = engine.runtime
    ran: list[int] = []

    @runtime.jobs.app.task(name="stalled_probe", pass_context=True)
    async def stalled_probe(context: procrastinate.JobContext) -> None:
        assert context.job is not None and context.job.id is not None
        ran.append(context.job.id)

    # The worker's periodic rescue (every 5 minutes, and once at start) must not take the
    # job first: wait for the start-up one, and keep clear of the next tick.
    async def periodic_rescues_idle() -> bool | None:
        rows = await query(
            engine,
            "SELECT status::text AS status FROM procrastinate.procrastinate_jobs"
            " WHERE task_name = 'rescue_stalled_jobs'",
        )
        return True if rows and all(r["status"] == "succeeded" for r in rows) else None

    await eventually(periodic_rescues_idle, "the start-up rescue of stalled jobs")
    if (to_tick := 300 - time.time() % 300) < 10:
        await asyncio.sleep(to_tick + 1)
        await eventually(periodic_rescues_idle, "the periodic rescue of stalled jobs")

    # A worker that stopped heartbeating an hour ago (SIGKILL, power loss) left a job 'doing'.
    async with runtime.db.main.begin() as conn:
        dead_worker = (
            await conn.execute(
                text(
                    "INSERT INTO procrastinate.procrastinate_workers (last_heartbeat)"
                    " VALUES (now() - interval '1 hour') RETURNING id"
                )
            )
        ).scalar_one()
        job_id = (
            await conn.execute(
                text(
                    "INSERT INTO procrastinate.procrastinate_jobs"
                    " (queue_name, task_name, args, status, worker_id)"
                    " VALUES ('default', 'stalled_probe', '{}', 'doing', :w) RETURNING id"
                ),
                {"w": dead_worker},
            )
        ).scalar_one()
    assert ran == []

    assert await runtime.jobs.rescue_stalled() == 1
    row = await job_row(engine, job_id)
    assert row["status"] in ("todo", "doing", "succeeded")  # no longer stuck
    done = await wait_job(engine, job_id, "succeeded")  # the live worker ran it
    assert ran == [job_id]
    assert done["worker_id"] != dead_worker
    assert await runtime.jobs.rescue_stalled() == 0


# --- Backoff (unit) ---


def _job(attempts: int) -> Job:
    return Job(
        id=1,
        queue="default",
        lock=None,
        queueing_lock=None,
        task_name="t",
        attempts=attempts,
    )


def test_backoff_delay_is_exponential_and_capped() -> None:
    b = Backoff(first_s=2.0, max_s=30.0, jitter=0.2)
    assert [b.step(n) for n in range(7)] == [2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    assert b.step(1000) == 30.0  # no overflow for absurd attempt counts
    assert Backoff(first_s=0.0, max_s=5.0).delay(4) == 0.0
    for n in range(7):  # jitter only lengthens a wait, by at most the fraction
        assert b.step(n) <= b.delay(n) <= b.step(n) * 1.2


def test_backoff_gives_up_after_max_attempts() -> None:
    b = JobRetry(max_attempts=3, backoff=Backoff(first_s=1.0, max_s=60.0))
    boom = RuntimeError("boom")
    before = datetime.now(UTC)
    first = b.get_retry_decision(exception=boom, job=_job(0))  # run 1 failed
    second = b.get_retry_decision(exception=boom, job=_job(1))  # run 2 failed
    assert first is not None and second is not None
    assert first.retry_at is not None and second.retry_at is not None
    assert first.retry_at >= before + timedelta(seconds=1)
    assert second.retry_at >= before + timedelta(seconds=2)
    assert first.retry_at < datetime.now(UTC) + timedelta(seconds=60)
    assert b.get_retry_decision(exception=boom, job=_job(2)) is None  # run 3: dead letter
    assert b.get_retry_decision(exception=boom, job=_job(7)) is None
    assert (
        JobRetry(max_attempts=1, backoff=Backoff(first_s=1.0, max_s=1.0)).get_retry_decision(
            exception=boom, job=_job(0)
        )
        is None
    )


async def test_a_job_that_already_ran_is_not_marked_queued_again(db) -> None:
    # A fast worker may run a job (and mark its stage done) before the deferrer records it
    # as queued: that late record must not overwrite the job's own outcome.
    key = StageKey("s1", "extract", 1)
    async with db.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO sessions (session_id, device_id, started_at) VALUES ('s1', 'd', now())"
            )
        )
        await stages.mark(conn, key, stages.DONE, fingerprint="fp", job_id=5)
        await stages.mark_queued(conn, key, 5)  # the late record of job 5
        rows = (await conn.execute(text("SELECT status, job_id FROM session_stages"))).all()
        assert [tuple(r) for r in rows] == [("done", 5)]
        await stages.mark_queued(conn, key, 6)  # a new job for new input
        rows = (await conn.execute(text("SELECT status, job_id FROM session_stages"))).all()
        assert [tuple(r) for r in rows] == [("queued", 6)]
        assert await stages.is_done(conn, key, "fp")  # what was last done is still known
