"""Durable jobs in PostgreSQL (procrastinate): every downstream stage of a session is a job.

- A stage job is deferred with a queueing lock derived from its idempotency key (session,
  stage, stage version), so at most one is queued per key; when it runs it records its state
  in `session_stages` and skips work already done for the same input (stages.py).
- Failures retry with exponential backoff (base * 2**attempt, capped). After the last attempt
  the job stays in procrastinate's `failed` state and the stage row says `failed`: the
  dead-letter state, listed by `GET /v1/jobs?status=failed` and retried by
  `POST /v1/jobs/{id}/retry`.
- Periodic tasks: the idle-session scan (sessions silent for the session gap are finalised),
  the rescue of jobs left `doing` by a worker that died (SIGKILL, power loss), and the nightly
  consolidation (consolidate.py): an hourly tick that runs it in the hour of
  `consolidation_time` in `timezone`, once per local night (an hourly tick, not a cron at a
  UTC hour, so daylight-saving changes never move it), and the events retention (observability
  events older than `events_retention_days` deleted in batches; `events_retention_cron`).
Stages: finalise → extract → graph (extraction.py); each defers the next when it completes,
and the minute scan queues what a new extractor or graph version has not processed yet.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import procrastinate
from procrastinate.exceptions import AlreadyEnqueued
from procrastinate.jobs import Job
from procrastinate.retry import BaseRetryStrategy, RetryDecision
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from context_engine.config import Settings
from context_engine.index.entity_vectors import EntityEmbedding
from context_engine.index.segment_vectors import EMBED_STAGE, EMBED_VERSION, SegmentEmbedding
from context_engine.ingest import sessions
from context_engine.memory.consolidate import Consolidator, create_run
from context_engine.observe.chronicler import Chronicler
from context_engine.observe.recorder import EventRecorder
from context_engine.pipeline import stages
from context_engine.pipeline.job_manager import StageJobManager
from context_engine.pipeline.session_stages import SessionStages, StageOutcome
from context_engine.pipeline.stages import StageKey
from context_engine.privacy.forget import Forgetter
from context_engine.store.db import libpq_conninfo
from her_os_shared.creatures import CreatureName
from her_os_shared.events import EventType
from her_os_shared.logging import get_logger
from her_os_shared.retry import Backoff, retry_until_done

log = get_logger(__name__)

JOBS_SCHEMA = "procrastinate"  # created by migration 0002
# A worker silent this long is dead (procrastinate's heartbeat default): its jobs are stalled.
STALLED_AFTER_S = 30.0
JOB_STATUSES = ("todo", "doing", "succeeded", "failed", "cancelled", "aborting", "aborted")


_COUNTS = text(
    "SELECT status::text, count(*) FROM procrastinate.procrastinate_jobs GROUP BY status"
)
_LIST = text(
    """
    SELECT j.id, j.task_name, j.status::text AS status, j.args, j.attempts, j.scheduled_at,
           j.queueing_lock,
           (SELECT max(e.at) FROM procrastinate.procrastinate_events e WHERE e.job_id = j.id)
               AS updated_at
    FROM procrastinate.procrastinate_jobs j
    WHERE (CAST(:status AS text) IS NULL OR j.status::text = CAST(:status AS text))
      AND (CAST(:job_id AS bigint) IS NULL OR j.id = CAST(:job_id AS bigint))
    ORDER BY j.id DESC LIMIT :limit OFFSET :offset
    """
)


class JobRetry(BaseRetryStrategy):
    """procrastinate's retry decision on the shared backoff (her_os_shared.retry): a failed
    run waits `backoff.delay(attempts)` (base * 2**attempt, capped, jittered); after
    `max_attempts` runs in all the job is left `failed` (dead letter)."""

    def __init__(self, max_attempts: int, backoff: Backoff) -> None:
        self.max_attempts = max_attempts
        self.backoff = backoff

    def get_retry_decision(self, *, exception: BaseException, job: Job) -> RetryDecision | None:
        if job.attempts + 1 >= self.max_attempts:
            return None
        return RetryDecision(retry_in={"seconds": self.backoff.delay(job.attempts)})


StageBody = Callable[[StageKey], Awaitable[str]]


class JobQueue:
    def __init__(
        self,
        settings: Settings,
        engine: AsyncEngine,
        recorder: EventRecorder | None = None,
        session_stages: SessionStages | None = None,
        embedding: SegmentEmbedding | None = None,
        consolidator: Consolidator | None = None,
        chronicler: Chronicler | None = None,
        forgetter: Forgetter | None = None,
        entity_embedding: EntityEmbedding | None = None,
    ) -> None:
        self.settings = settings
        self.engine = engine
        self.recorder = recorder
        # extract and graph stages; None = finalisation only (tests of the queue itself)
        self.session_stages = session_stages
        # the embed stage; None = no vector index
        self.embedding = embedding
        # the consolidation (nightly and POST /v1/consolidate); None = not scheduled
        self.consolidator = consolidator
        # the events retention; None = not scheduled
        self.chronicler = chronicler
        # forget requests (privacy/forget.py); None = none queued
        self.forgetter = forgetter
        # entity vectors (index/entity_vectors.py); None = none kept
        self.entity_embedding = entity_embedding
        self.gap = timedelta(seconds=settings.session_gap_s)
        self.retry = JobRetry(
            settings.job_max_attempts,
            settings.backoff(settings.job_retry_base_s, settings.job_retry_max_s),
        )
        connector = procrastinate.PsycopgConnector(
            conninfo=libpq_conninfo(settings.database_url.get_secret_value()),
            kwargs={"options": f"-c search_path={JOBS_SCHEMA}"},
            min_size=1,
            max_size=settings.jobs_concurrency + 2,
        )
        self.app = procrastinate.App(connector=connector)
        # retries that give way to a waiting job of the same key (job_manager.py)
        self.job_manager = self.app.job_manager = StageJobManager(connector=connector)
        self._register()

    # --- lifecycle ---

    async def open(self) -> None:
        await self.app.open_async()

    async def close(self) -> None:
        await self.app.close_async()

    async def run_worker(self, *, wait: bool = True) -> None:
        """Run the worker until cancelled (wait=True) or until the queue is empty."""
        await self.app.run_worker_async(
            name="context-engine",
            concurrency=self.settings.jobs_concurrency,
            wait=wait,
            install_signal_handlers=False,
            listen_notify=wait,
            fetch_job_polling_interval=1.0 if wait else 0.1,
            shutdown_graceful_timeout=10.0,
        )

    # --- tasks ---

    def _register(self) -> None:
        app = self.app

        @app.task(name="finalise_session", retry=self.retry, pass_context=True)
        async def finalise_session(context: procrastinate.JobContext, session_id: str) -> str:
            key = StageKey(session_id, sessions.FINALISE_STAGE, sessions.FINALISE_VERSION)
            return await self.run_stage(context.job, key, self._finalise)

        @app.task(name="extract_session", retry=self.retry, pass_context=True)
        async def extract_session(context: procrastinate.JobContext, session_id: str) -> str:
            assert self.session_stages is not None
            key = self.session_stages.extract_key(session_id)
            return await self.run_stage(context.job, key, self._extract)

        @app.task(name="graph_session", retry=self.retry, pass_context=True)
        async def graph_session(context: procrastinate.JobContext, session_id: str) -> str:
            assert self.session_stages is not None
            key = self.session_stages.graph_key(session_id)
            return await self.run_stage(context.job, key, self._graph)

        @app.task(name="embed_session", retry=self.retry, pass_context=True)
        async def embed_session(context: procrastinate.JobContext, session_id: str) -> str:
            key = StageKey(session_id, EMBED_STAGE, EMBED_VERSION)
            return await self.run_stage(context.job, key, self._embed)

        @app.periodic(cron=self.settings.idle_scan_cron, periodic_id="idle_sessions")
        @app.task(name="scan_idle_sessions", queueing_lock="scan_idle_sessions")
        async def scan_idle_sessions(timestamp: int) -> int:
            return await self.scan_idle() + await self.scan_pending()

        # Every consolidation job shares one lock: runs never overlap in the queue.
        @app.task(name="consolidate", retry=self.retry, lock="consolidation")
        async def consolidate(run_id: int) -> str:
            assert self.consolidator is not None
            return str((await self.consolidator.run(run_id))["status"])

        minute = int(self.settings.consolidation_time.split(":")[1])

        @app.periodic(cron=f"{minute} * * * *", periodic_id="nightly_consolidation")
        @app.task(
            name="nightly_consolidation",
            retry=self.retry,
            lock="consolidation",
            queueing_lock="nightly_consolidation",
        )
        async def nightly_consolidation(timestamp: int) -> str:
            return await self.nightly(timestamp)

        # One job for every entity: what changed is found by the documents' hashes, so a
        # queued run covers every extraction that finished before it starts.
        @app.task(
            name="embed_entities", retry=self.retry, queueing_lock="embed_entities",
            lock="embed_entities",
        )  # fmt: skip
        async def embed_entities() -> str:
            return await self._embed_entities()

        @app.periodic(cron=self.settings.events_retention_cron, periodic_id="events_retention")
        @app.task(name="events_retention", queueing_lock="events_retention")
        async def events_retention(timestamp: int) -> int:
            return await self.purge_events()

        # A forget that a store refused is retried until every store is done (ADR 0013).
        @app.task(name="forget", retry=self.retry, lock="forget")
        async def forget(request_id: int) -> str:
            assert self.forgetter is not None
            return str((await self.forgetter.run(request_id))["status"])

        @app.periodic(cron="*/5 * * * *", periodic_id="rescue_stalled")
        @app.task(name="rescue_stalled_jobs", queueing_lock="rescue_stalled_jobs")
        async def rescue_stalled_jobs(timestamp: int) -> int:
            return await self.rescue_stalled()

    async def run_stage(self, job: Job, key: StageKey, body: StageBody) -> str:
        """Run one attempt of a stage with its bookkeeping; re-raise failures so procrastinate
        retries them (or dead-letters the job after the last attempt)."""
        attempt = job.attempts + 1
        async with self.engine.begin() as conn:
            await stages.mark(conn, key, stages.RUNNING, attempts=attempt, job_id=job.id)
        try:
            outcome = await body(key)
        except Exception as exc:
            final = attempt >= self.retry.max_attempts
            log.warning("jobs.stage_failed", stage=key.stage, session_id=key.session_id,
                        attempt=attempt, final=final, error=repr(exc)[:500])  # fmt: skip
            await stages.mark_failure(
                self.engine, key, attempts=attempt, error=repr(exc), final=final, job_id=job.id or 0
            )
            if self.recorder:
                await self.recorder.emit(
                    CreatureName.OUROBOROS,
                    EventType.ERROR,
                    session_id=key.session_id,
                    data={
                        "stage": key.stage,
                        "attempt": attempt,
                        "dead_letter": final,
                        "error": repr(exc)[:300],
                    },
                )
            raise
        return outcome

    async def _finalise(self, key: StageKey) -> str:
        async with self.engine.begin() as conn:
            fp, _ = await sessions.finalise_input(conn, key.session_id)
            if await stages.is_done(conn, key, fp):
                await stages.mark(conn, key, stages.DONE)  # back from "running"
                return "already_done"
            result = await sessions.finalise(
                conn, key.session_id, now=datetime.now(UTC), gap=self.gap
            )
            if result.status == "missing":
                return "missing"
            if result.status == "finalised":
                await stages.mark(conn, key, stages.DONE, fingerprint=result.fingerprint)
            else:  # spoke again meanwhile: the idle scan queues it later
                await stages.mark(conn, key, stages.QUEUED)
        if result.status == "finalised" and self.recorder:
            await self.recorder.emit(
                CreatureName.OUROBOROS,
                EventType.COMPLETE,
                session_id=key.session_id,
                data={"stage": "finalise", "segments_count": result.segments_count},
            )
        if result.status == "finalised":
            await self.defer_extract(key.session_id)
        return result.status

    async def _extract(self, key: StageKey) -> str:
        assert self.session_stages is not None
        outcome: StageOutcome = await self.session_stages.extract(key)
        if outcome.status in ("done", "already_done"):
            await self.defer_graph(key.session_id)
            await self.defer_embed_entities()
        return outcome.status

    async def _embed(self, key: StageKey) -> str:
        assert self.embedding is not None
        count = await self.embedding.embed_session(key.session_id)
        async with self.engine.begin() as conn:
            await stages.mark(conn, key, stages.DONE, fingerprint=self.embedding.space_name)
        if count:
            log.info("embed.session", session_id=key.session_id, segments=count)
            if self.recorder:
                await self.recorder.emit(
                    CreatureName.EEL, EventType.COMPLETE, session_id=key.session_id,
                    data={"segments": count, "space": self.embedding.space_name},
                )  # fmt: skip
        await self.embedding.mark_ready_if_complete()
        return f"embedded {count}"

    async def _embed_entities(self) -> str:
        emb = self.entity_embedding
        if emb is None or not emb.opened:
            return "no vector index"
        count = await emb.embed_pending()
        if count:
            log.info("embed.entities", entities=count)
            if self.recorder:
                await self.recorder.emit(
                    CreatureName.EEL, EventType.COMPLETE,
                    data={"entities": count, "space": emb.segments.space_name},
                )  # fmt: skip
        return f"embedded {count} entities"

    async def defer_embed_entities(self) -> int | None:
        if self.entity_embedding is None:
            return None
        try:
            return int(await self.app.configure_task("embed_entities").defer_async())
        except AlreadyEnqueued:
            return None

    async def _graph(self, key: StageKey) -> str:
        assert self.session_stages is not None
        return (await self.session_stages.write_graph(key)).status

    # --- deferring ---

    async def defer_stage(
        self, task: str, key: StageKey, *, lock: str | None = None, **kwargs: Any
    ) -> int | None:
        """Queue a stage job; None when one with the same key is already queued. Jobs sharing
        a `lock` (default: the session's) run one at a time."""
        try:
            job_id = await self.app.configure_task(
                task, queueing_lock=key.lock, lock=lock or f"session:{key.session_id}"
            ).defer_async(**kwargs)
        except AlreadyEnqueued:
            return None
        async with self.engine.begin() as conn:
            await stages.mark_queued(conn, key, job_id)
        return job_id

    async def defer_finalise(self, session_id: str) -> int | None:
        key = StageKey(session_id, sessions.FINALISE_STAGE, sessions.FINALISE_VERSION)
        return await self.defer_stage("finalise_session", key, session_id=session_id)

    async def defer_extract(self, session_id: str) -> int | None:
        if self.session_stages is None:
            return None
        key = self.session_stages.extract_key(session_id)
        return await self.defer_stage("extract_session", key, session_id=session_id)

    async def defer_graph(self, session_id: str) -> int | None:
        if self.session_stages is None or self.session_stages.graph is None:
            return None
        key = self.session_stages.graph_key(session_id)
        return await self.defer_stage("graph_session", key, session_id=session_id)

    async def defer_embed(self, session_id: str) -> int | None:
        if self.embedding is None:
            return None
        key = StageKey(session_id, EMBED_STAGE, EMBED_VERSION)
        # Its own lock, not the session's: embedding never waits behind an LLM extraction.
        return await self.defer_stage(
            "embed_session", key, lock=f"embed:{session_id}", session_id=session_id
        )

    async def defer_forget(self, request_id: int) -> int:
        return int(await self.app.configure_task("forget").defer_async(request_id=request_id))

    async def scan_pending(self) -> int:
        """Queue extraction / graph writes a new extractor or graph version has not done yet
        (and sessions finalised before extraction existed), and embedding a new embedding
        space (or a missed ingest) has not done."""
        queued = 0
        if self.embedding is not None and self.embedding.opened:
            for session_id in await self.embedding.pending_sessions():
                queued += await self.defer_embed(session_id) is not None
        emb = self.entity_embedding
        if emb is not None and emb.opened and await emb.pending():
            queued += await self.defer_embed_entities() is not None
        if self.session_stages is None:
            return queued
        to_extract, to_graph = await self.session_stages.pending()
        for session_id in to_extract:
            queued += await self.defer_extract(session_id) is not None
        for session_id in to_graph:
            queued += await self.defer_graph(session_id) is not None
        if queued:
            log.info("jobs.pending_stages_queued", count=queued)
        return queued

    async def session_changed(self, session_id: str) -> None:
        """Ingestion wrote segments: a session already silent for the gap (an import of old
        recordings, a late sweep) is finalised now; a live one by the idle scan later."""
        async with self.engine.connect() as conn:
            idle = await sessions.idle_sessions(
                conn, now=datetime.now(UTC), gap=self.gap, among=[session_id]
            )
        if idle:
            await self.defer_finalise(session_id)

    async def scan_idle(self) -> int:
        async with self.engine.connect() as conn:
            idle = await sessions.idle_sessions(conn, now=datetime.now(UTC), gap=self.gap)
        queued = 0
        for session_id in idle:
            if await self.defer_finalise(session_id) is not None:
                queued += 1
        if queued:
            log.info("jobs.idle_sessions_queued", count=queued)
        return queued

    async def nightly(self, timestamp: int) -> str:
        """The hourly tick: consolidate as of `timestamp` if it falls in the configured hour
        of the local day and this night has no run yet (or only a failed one)."""
        if self.consolidator is None:
            return "no consolidation"
        at = datetime.fromtimestamp(timestamp, UTC)
        local = at.astimezone(ZoneInfo(self.settings.timezone))
        if local.hour != int(self.settings.consolidation_time.split(":")[0]):
            return "not the hour"
        night = local.date().isoformat()
        async with self.engine.begin() as conn:
            run_id = await create_run(conn, trigger="schedule", as_of=at, night=night)
        if run_id is None:
            return f"night {night} already consolidated"
        return str((await self.consolidator.run(run_id))["status"])

    async def request_consolidation(self, as_of: datetime) -> dict[str, Any]:
        """POST /v1/consolidate: a queued run and its job (it waits behind any running one)."""
        async with self.engine.begin() as conn:
            run_id = await create_run(conn, trigger="api", as_of=as_of)
        assert run_id is not None  # only nightly runs can collide
        job_id = await self.app.configure_task("consolidate").defer_async(run_id=run_id)
        log.info("consolidation.queued", run_id=run_id, job_id=job_id, as_of=as_of.isoformat())
        return {"run_id": run_id, "job_id": job_id}

    async def purge_events(self, now: datetime | None = None) -> int:
        """Delete the observability events older than the retention window (relative to
        `now`, default the current time: a job that ran late still keeps the full window)."""
        if self.chronicler is None:
            return 0
        now = now or datetime.now(UTC)
        return await self.chronicler.purge(
            now - timedelta(days=self.settings.events_retention_days)
        )

    async def rescue_stalled(self) -> int:
        """Jobs left `doing` by a worker that stopped heartbeating go back to `todo`."""
        stalled = list(
            await self.job_manager.get_stalled_jobs(seconds_since_heartbeat=STALLED_AFTER_S)
        )
        for job in stalled:
            await self.job_manager.retry_job(job)
        if stalled:
            log.warning("jobs.stalled_rescued", count=len(stalled), ids=[j.id for j in stalled])
        return len(stalled)

    # --- inspection (the API) ---

    async def counts(self) -> dict[str, int]:
        async with self.engine.connect() as conn:
            rows = await conn.execute(_COUNTS)
            found = {status: n for status, n in rows}
        return {s: int(found.get(s, 0)) for s in JOB_STATUSES}

    async def list_jobs(
        self,
        *,
        status: str | None = None,
        limit: int = 50,
        offset: int = 0,
        job_id: int | None = None,
    ) -> list[dict[str, Any]]:
        params = {"status": status, "job_id": job_id, "limit": limit, "offset": offset}
        async with self.engine.connect() as conn:
            rows = await conn.execute(_LIST, params)
            return [dict(r._mapping) for r in rows]

    async def retry_failed(self, job_id: int) -> int | None:
        """Put a failed (dead-lettered) job back in the queue; returns the id of the job that
        will do its work (its own, or the same task already waiting with the same arguments,
        which supersedes it), None if there is no such failed job. `AlreadyEnqueued` when
        another job of its queueing lock waits."""
        jobs = list(await self.job_manager.list_jobs_async(id=job_id))
        if not jobs or jobs[0].status != "failed":
            return None
        return await self.job_manager.retry_or_give_way(job_id, datetime.now(UTC))


async def run_forever(queue: JobQueue, stopping: asyncio.Event) -> None:
    """The in-process worker, restarted after a crash (e.g. PostgreSQL went away) until
    `stopping` is set. A worker cancelled while PostgreSQL is down may raise something other
    than CancelledError: `stopping` is what ends the loop, not the exception type."""
    backoff = queue.settings.backoff(1.0)
    while not stopping.is_set():
        try:
            await retry_until_done(
                queue.run_worker, backoff=backoff, log=log, event="jobs.worker_crashed",
                stop=stopping,
            )  # fmt: skip
        except asyncio.CancelledError:
            raise
        except Exception:  # the last crash, once stopping was set
            return
