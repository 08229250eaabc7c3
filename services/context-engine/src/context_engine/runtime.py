"""The engine's running parts, built once per app: pools, recorder, ingestor, watcher, job
queue and worker, retriever. `start()` waits for the schema, then starts the background work;
`stop()` stops it in reverse order. Nothing runs fire-and-forget: every task is owned here."""

from __future__ import annotations

import asyncio
import time
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING

from context_engine.bm25 import Bm25Leg
from context_engine.config import Settings
from context_engine.consolidate import Consolidator
from context_engine.db import Databases, create_databases, ping
from context_engine.embed import make_embedder
from context_engine.embedding import SegmentEmbedding
from context_engine.extraction import SessionStages, make_extractor
from context_engine.graph_leg import GraphLeg
from context_engine.ingest import Ingestor
from context_engine.jobs import JobQueue, run_forever
from context_engine.migrate import migrate_until_done
from context_engine.recorder import EventRecorder
from context_engine.retrieve import FusionParams, RetrievalLeg, Retriever
from context_engine.search_index import Changes, SegmentSearchIndex
from context_engine.vector_leg import VectorLeg
from context_engine.vectors.base import make_vector_store
from context_engine.watcher import TranscriptWatcher
from her_os_shared.logging import get_logger

if TYPE_CHECKING:
    from context_engine.graph import KnowledgeGraph

log = get_logger(__name__)

STOP_TIMEOUT_S = 10.0


class Runtime:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.db: Databases = create_databases(settings)
        self.recorder = EventRecorder(self.db.events)
        # The graph is optional (no URL = none): extraction still fills PostgreSQL.
        self.graph: KnowledgeGraph | None = None
        if settings.graph_url:
            from context_engine.graph import KnowledgeGraph  # graphiti is heavy: only if used

            self.graph = KnowledgeGraph(settings)
        self.session_stages = SessionStages(
            settings, self.db.main, make_extractor(settings), self.graph, self.recorder
        )
        self.embedding: SegmentEmbedding | None = None
        if settings.vector_index_enabled:
            self.embedding = SegmentEmbedding(
                self.db.main,
                make_embedder(settings),
                make_vector_store(settings),
                batch=settings.embed_batch_segments,
            )
        self.consolidator = Consolidator(self.db.main, settings, self.recorder, self.graph)
        self.jobs = JobQueue(
            settings,
            self.db.main,
            self.recorder,
            self.session_stages,
            self.embedding,
            self.consolidator,
        )
        self.search_index = (
            SegmentSearchIndex(settings.search_index_dir, self.db.main)
            if settings.keyword_backend == "index"
            else None
        )
        self.ingestor = Ingestor(
            self.db.main,
            settings.transcripts_dir,
            batch_segments=settings.ingest_batch_segments,
            on_session=self.jobs.session_changed,
            on_changed=self._index_changed,
            recorder=self.recorder,
        )
        self.consolidator.ingest = self.ingestor.ingest_file
        self.watcher = TranscriptWatcher(
            settings.transcripts_dir,
            self._ingest,
            debounce_s=settings.watch_debounce_s,
            max_delay_s=settings.watch_max_delay_s,
            reconcile_interval_s=settings.reconcile_interval_s,
            concurrency=settings.ingest_concurrency,
            is_current=self.ingestor.is_current,
        )
        self.retriever = Retriever(
            self.db.main,
            self._legs(),
            self.recorder,
            params=FusionParams(
                rrf_k=settings.rrf_k,
                weights=dict(settings.leg_weights),
                pool=settings.candidate_pool,
                decay_half_life_days=settings.decay_half_life_days,
                decay_floor=settings.decay_floor,
                mmr_lambda=settings.mmr_lambda,
                speaker_boost=settings.speaker_boost,
                tier_weights=dict(settings.tier_weights),
            ),
            leg_timeout_s=settings.leg_timeout_s,
        )
        self.schema_ready = asyncio.Event()
        self.started = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._jobs_open = False
        self._stopping = asyncio.Event()
        self._watching = False

    def _legs(self) -> list[RetrievalLeg]:
        legs: list[RetrievalLeg] = []
        for name in self.settings.context_legs:
            if name == "bm25":
                legs.append(Bm25Leg(self.db.main, self.search_index))
            elif name == "vector" and self.embedding is not None:
                legs.append(VectorLeg(self.embedding))
            elif name == "graph":
                legs.append(
                    GraphLeg(
                        self.db.main,
                        self.graph,
                        max_entities=self.settings.graph_leg_entities,
                        facts_per_entity=self.settings.graph_leg_facts,
                    )
                )
        return legs

    @property
    def ready(self) -> bool:
        return self.schema_ready.is_set()

    async def _ingest(self, path: Path) -> None:
        await self.ingestor.ingest_file(path)

    async def _index_changed(self, session_id: str, segment_ids: set[str] | None) -> None:
        if self.search_index is not None:
            changes = Changes()
            changes.add(session_id, segment_ids)
            await self.search_index.apply(changes)
        if self.embedding is not None and self._jobs_open:
            await self.jobs.defer_embed(session_id)

    async def start(self) -> None:
        """Start in the background; returns at once."""
        self._tasks.append(asyncio.create_task(self._start(), name="context-engine-start"))

    async def _start(self) -> None:
        await migrate_until_done(self.settings, self.schema_ready)
        if self.settings.jobs_enabled:
            await self._open_jobs()
            self._tasks.append(
                asyncio.create_task(run_forever(self.jobs, self._stopping), name="job-worker")
            )
        if self.search_index is not None:
            await self.search_index.open()
        if self.graph is not None:
            self._tasks.append(asyncio.create_task(self._open_graph(), name="graph-open"))
        if self.embedding is not None:
            await self._open_vectors()
        await self.ingestor.load_offsets()
        # The watcher starts its observer before scanning the backlog (watcher.py).
        await self.watcher.start()
        self._watching = True
        self.started.set()
        log.info("engine.started")

    async def _open_jobs(self) -> None:
        delay = 0.5
        while True:
            try:
                await self.jobs.open()
            except Exception as exc:  # PostgreSQL unreachable: retry, /health says why not
                log.warning("jobs.open_retry", error=repr(exc)[:300], retry_in_s=delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.settings.migrate_retry_max_s)
                continue
            self._jobs_open = True
            return

    async def _open_graph(self) -> None:
        """Indices and constraints, retried until the graph server answers; graph jobs that
        run before then fail and are retried by the queue."""
        assert self.graph is not None
        delay = 0.5
        while True:
            try:
                await self.graph.open()
            except Exception as exc:
                log.warning("graph.open_retry", error=repr(exc)[:300], retry_in_s=delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.settings.migrate_retry_max_s)
                continue
            log.info("graph.open", backend=self.settings.graph_backend)
            return

    async def _open_vectors(self) -> None:
        """The vector index (in process by default: fast); a failure leaves the vector leg
        reporting errors and embedding jobs retrying, never the engine down."""
        assert self.embedding is not None
        try:
            await self.embedding.open()
        except Exception as exc:
            log.error("vectors.open_failed", error=repr(exc)[:500])
            return
        self._tasks.append(asyncio.create_task(self._warm_embedder(), name="embedder-warm-up"))
        if self._jobs_open:
            await self.jobs.scan_pending()  # a new space, or what was missed while down

    async def _warm_embedder(self) -> None:
        """Load the model now, in the background, not in the first query (a bundled model
        takes seconds to load: the first searches would time out their leg)."""
        assert self.embedding is not None
        started = time.perf_counter()
        try:
            await self.embedding.embedder.embed_query("warm-up")
        except Exception as exc:  # the embed jobs and the vector leg report and retry it
            log.error("vectors.embedder_failed", error=repr(exc)[:500])
            return
        log.info("vectors.embedder_ready", seconds=round(time.perf_counter() - started, 2))

    async def stop(self) -> None:
        """Stop everything, in bounded time even when PostgreSQL is gone."""
        self._stopping.set()
        if self._watching:
            await self.watcher.stop()
        for task in reversed(self._tasks):
            task.cancel()
        if self._tasks:
            _, stuck = await asyncio.wait(self._tasks, timeout=STOP_TIMEOUT_S)
            for task in stuck:
                log.warning("engine.stop_abandoned", task=task.get_name())
        if self.search_index is not None:
            try:
                async with asyncio.timeout(STOP_TIMEOUT_S):
                    await self.search_index.close()
            except Exception as exc:  # rebuilt at the next start (no clean marker)
                log.warning("search_index.close_failed", error=repr(exc)[:300])
        if self.graph is not None:
            with suppress(Exception):
                async with asyncio.timeout(STOP_TIMEOUT_S):
                    await self.graph.close()
        if self.embedding is not None:
            with suppress(Exception):
                async with asyncio.timeout(STOP_TIMEOUT_S):
                    await self.embedding.close()
        closing = getattr(self.session_stages.extractor, "aclose", None)
        if closing is not None:  # the LLM extractor's HTTP clients
            with suppress(Exception):
                async with asyncio.timeout(STOP_TIMEOUT_S):
                    await closing()
        if self._jobs_open:
            with suppress(Exception):
                async with asyncio.timeout(STOP_TIMEOUT_S):
                    await self.jobs.close()
        with suppress(Exception):
            async with asyncio.timeout(STOP_TIMEOUT_S):
                await self.db.dispose()

    async def healthy(self) -> bool:
        return self.ready and await ping(self.db.main, self.settings.health_timeout_s)
