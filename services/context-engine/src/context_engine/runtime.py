"""The engine's running parts, built once per app (the composition root): pools, chronicler and
recorder, the LLM client and the embedder, the graph, the extraction stages, the indexes, the
ingestor, forgetting, the reflection and consolidation, the job queue, the watchers, the
retriever. `start()` waits for the schema, then starts the background work; `stop()` stops it
and closes the components in reverse order. Nothing runs fire-and-forget: every task is owned
here (the chronicler's writer through its start/stop)."""

from __future__ import annotations

import asyncio
import gc
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from context_engine.config import Settings
from context_engine.embed import make_embedder
from context_engine.embed.observed import ObservedEmbedder
from context_engine.embed.query_batch import BatchedQueries
from context_engine.embed.query_cache import CachedQueries
from context_engine.index.entity_vectors import EntityEmbedding
from context_engine.index.keyword import Changes, SegmentSearchIndex
from context_engine.index.segment_vectors import SegmentEmbedding
from context_engine.ingest.event_files import EventFileReader
from context_engine.ingest.transcripts import Ingestor
from context_engine.ingest.watcher import TranscriptWatcher
from context_engine.knowledge.query_facts import QueryFacts
from context_engine.knowledge.speakers import KnownSpeakers
from context_engine.llm.factory import make_llm_client
from context_engine.memory.consolidate import Consolidator
from context_engine.memory.daily import DailyReflector
from context_engine.observe.chronicler import Chronicler
from context_engine.observe.health import Health, Outcomes, Probe
from context_engine.observe.health import check as check_health
from context_engine.observe.recorder import EventRecorder
from context_engine.pipeline.drift import StoreChecker
from context_engine.pipeline.jobs import STALLED_AFTER_S, JobQueue, run_forever
from context_engine.pipeline.session_stages import SessionStages, extractor_mode, make_extractor
from context_engine.privacy.forget import ForgetParts, Forgetter
from context_engine.privacy.voices import VoiceBank
from context_engine.search.legs.graph import GraphLeg
from context_engine.search.legs.keyword import Bm25Leg
from context_engine.search.legs.vector import VectorLeg
from context_engine.search.query import RetrievalLeg
from context_engine.search.retrieve import FusionParams, Retriever
from context_engine.store.db import Databases, create_databases, ping
from context_engine.store.idempotency import PgIdempotencyStore
from context_engine.store.migrate import migrate_until_done
from context_engine.store.stats import engine_stats
from context_engine.vectors.factory import make_vector_store
from her_os_shared.creatures import CreatureName
from her_os_shared.events import EventType
from her_os_shared.idempotency import Idempotency
from her_os_shared.logging import get_logger
from her_os_shared.memo import AsyncLRU
from her_os_shared.retry import retry_until_done

if TYPE_CHECKING:
    from context_engine.graph import KnowledgeGraph

log = get_logger(__name__)

STOP_TIMEOUT_S = 10.0


class Runtime:
    """The composition root: every component built once, here, in dependency order (each
    from what is built above it), none patched afterwards; `stop()` closes them in reverse.
    The providers (the LLM client, the embedder) are built once and shared by whatever uses
    them (extraction, the graph, the reflection, the vectors), observed, so `/health` sees
    every call."""

    def __init__(self, settings: Settings) -> None:
        s = self.settings = settings
        # What stop() closes, in the order built; closed last to first.
        self._closers: list[tuple[str, Callable[[], Awaitable[object]]]] = []

        # 1. PostgreSQL and observability: everything below may record events.
        self.db: Databases = create_databases(s)
        self._closing("databases", self.db.dispose)
        self.chronicler = Chronicler(self.db.events, s)
        # stop() writes what is pending; before the pools close, after everything else
        self._closing("chronicler", self.chronicler.stop)
        # What the engine serves without (observe/health.py): observed layers report here.
        self.outcomes = Outcomes()
        self.recorder = EventRecorder(self.chronicler, self.outcomes)

        # 2. Providers, one of each. LLMConfigError / EmbedderConfigError name the setting.
        self.llm = make_llm_client(s, required=extractor_mode(s) == "llm", recorder=self.recorder)
        if self.llm is not None:
            self._closing("llm", self.llm.aclose)
        self.embedder: ObservedEmbedder | None = None
        if s.vector_index_enabled or s.graph_url:
            self.embedder = ObservedEmbedder(
                CachedQueries(
                    BatchedQueries(make_embedder(s), s.query_embed_batch), s.query_embedding_cache
                ),
                self.outcomes,
            )
            self._closing("embedder", self.embedder.close)

        # 3. The graph (optional: no URL = none; extraction still fills PostgreSQL).
        self.graph: KnowledgeGraph | None = None
        if s.graph_url:
            from context_engine.graph import KnowledgeGraph  # graphiti is heavy: only if used
            from context_engine.graph.episodes import make_llm_client as make_graphiti_llm

            self.graph = KnowledgeGraph(
                s,
                embedder=self.embedder,
                llm=make_graphiti_llm(s, self.recorder),
                recorder=self.recorder,
            )
            self._closing("graph", self.graph.close)

        # 4. Extraction: the session stages on the extractor the settings choose.
        self.extractor = make_extractor(s, self.llm)
        self.session_stages = SessionStages(
            s, self.db.main, self.extractor, self.graph, self.recorder
        )

        # 5. Indexes: segment and entity vectors (same store and space), the keyword index.
        self.embedding: SegmentEmbedding | None = None
        self.entity_embedding: EntityEmbedding | None = None
        if s.vector_index_enabled:
            assert self.embedder is not None
            self.embedding = SegmentEmbedding(
                self.db.main, self.embedder, make_vector_store(s), batch=s.embed_batch_segments
            )
            self._closing("vectors", self.embedding.close)
            self.entity_embedding = EntityEmbedding(self.embedding, batch=s.embed_batch_segments)
        self.search_index = (
            SegmentSearchIndex(s.search_index_dir, self.db.main, retry=s.backoff(5.0))
            if s.keyword_backend == "index"
            else None
        )
        if self.search_index is not None:
            # rebuilt at the next start when it does not close cleanly (no clean marker)
            self._closing("search_index", self.search_index.close)

        # 6. Ingestion: transcripts and the audio pipeline's event files. What follows a
        # commit (the jobs, the keyword index) is reached through this runtime's methods.
        self.ingestor = Ingestor(
            self.db.main,
            s.transcripts_dir,
            batch_segments=s.ingest_batch_segments,
            on_session=self._session_changed,
            on_changed=self._index_changed,
            recorder=self.recorder,
        )
        self.event_files = EventFileReader(
            self.db.events, self.chronicler, s.events_dir, retention_days=s.events_retention_days
        )
        # Writes repeated with the same Idempotency-Key (POST /v1/memories) happen once.
        self.idempotency = Idempotency(
            PgIdempotencyStore(self.db.main), window_s=s.idempotency_window_s
        )

        # 7. Forgetting, across every store above (and the audio pipeline's voices).
        self.voices = (
            VoiceBank(
                s.audio_pipeline_url,
                s.internal_token.get_secret_value() if s.internal_token else "",
                timeout_s=s.audio_pipeline_timeout_s,
            )
            if s.audio_pipeline_url
            else None
        )
        if self.voices is not None:
            self._closing("voices", self.voices.close)
        self.forgetter = Forgetter(
            ForgetParts(
                engine=self.db.main,
                events_engine=self.db.events,
                transcripts_dir=s.transcripts_dir,
                events_dir=s.events_dir,
                ingestor=self.ingestor,
                chronicler=self.chronicler,
                event_files=self.event_files,
                search_index=self.search_index,
                embedding=self.embedding,
                graph=self.graph,
                recorder=self.recorder,
                rederive=self._rederive,
                voices=self.voices,
            )
        )

        # 8. Memory over time: the daily reflection and the consolidation that runs it.
        self.reflector = DailyReflector(
            self.db.main,
            s,
            recorder=self.recorder,
            llm=self.llm,
            ingest=self.ingestor.ingest_file,
            graph=self.graph,
        )
        self.consolidator = Consolidator(
            self.db.main, s, self.recorder, self.graph, reflector=self.reflector
        )

        # 9. Durable jobs over all of it.
        self.jobs = JobQueue(
            s,
            self.db.main,
            self.recorder,
            self.session_stages,
            self.embedding,
            self.consolidator,
            self.chronicler,
            forgetter=self.forgetter,
            entity_embedding=self.entity_embedding,
        )
        self.checker = StoreChecker(
            self.db.main,
            s.transcripts_dir,
            self.ingestor,
            jobs=self.jobs,
            embedding=self.embedding,
            graph=self.graph,
            recorder=self.recorder,
            jobs_open=lambda: self._jobs_open,
        )

        # 10. Watchers: new lines in the transcripts and event files.
        self.watcher = TranscriptWatcher(
            s.transcripts_dir,
            self._ingest,
            debounce_s=s.watch_debounce_s,
            max_delay_s=s.watch_max_delay_s,
            reconcile_interval_s=s.reconcile_interval_s,
            retry_max_s=s.migrate_retry_max_s,
            retry_jitter=s.retry_jitter,
            concurrency=s.ingest_concurrency,
            is_current=self.ingestor.is_current,
        )
        self.events_watcher = TranscriptWatcher(
            s.events_dir,
            self._read_events,
            debounce_s=s.events_watch_debounce_s,
            max_delay_s=max(s.events_watch_max_delay_s, s.events_watch_debounce_s),
            reconcile_interval_s=s.reconcile_interval_s,
            retry_max_s=s.migrate_retry_max_s,
            retry_jitter=s.retry_jitter,
            concurrency=1,
            is_current=self.event_files.is_current,
            name="events",
        )

        # 11. Retrieval: the legs, what is known about a query's subjects, the fusion.
        # The speakers heard (and the owner guess), read once for the vector leg and knowledge.
        self.speakers = KnownSpeakers(self.db.reads, ttl_s=s.speaker_names_ttl_s)
        self.knowledge = (
            QueryFacts(
                self.db.reads,
                self.graph,
                self.speakers,
                owner=s.owner_name,
                limit=s.context_facts_limit,
                max_entities=s.graph_leg_entities,
            )
            if s.context_facts_limit
            else None
        )
        self.retriever = Retriever(
            self.db.reads,
            self._legs(),
            self.recorder,
            params=FusionParams(
                rrf_k=s.rrf_k,
                weights=dict(s.leg_weights),
                pool=s.candidate_pool,
                decay_half_life_days=s.decay_half_life_days,
                decay_floor=s.decay_floor,
                mmr_lambda=s.mmr_lambda,
                speaker_boost=s.speaker_boost,
                tier_weights=dict(s.tier_weights),
                superseded_weight=s.superseded_weight,
                current_fact_weight=s.current_fact_weight,
            ),
            leg_timeout_s=s.leg_timeout_s,
            knowledge=self.knowledge,
            max_inflight=s.max_inflight_searches,
            running=s.searches_running,
        )

        # /v1 requests the token check let through / refused since the last basilisk metric
        self.auth_counts: Counter[str] = Counter()
        self.schema_ready = asyncio.Event()
        self.started = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._jobs_open = False
        self._health_checks: AsyncLRU[str, Health] = AsyncLRU(0)  # shared, never kept
        self._health: tuple[float, tuple[bool, ...], Health] | None = None  # (at, state, it)
        self._stopping = asyncio.Event()
        self._watching = False
        self._watching_events = False

    def _closing(self, name: str, close: Callable[[], Awaitable[object]]) -> None:
        self._closers.append((name, close))

    def _legs(self) -> list[RetrievalLeg]:
        legs: list[RetrievalLeg] = []
        for name in self.settings.context_legs:
            if name == "bm25":
                # Its second ranking (the turn after) unless weighed 0.
                next_turn = self.settings.leg_weights.get("bm25_next", 1.0) > 0
                legs.append(Bm25Leg(self.db.reads, self.search_index, next_turn=next_turn))
            elif name == "vector" and self.embedding is not None:
                speakers = self.speakers if self.settings.vector_query_without_speakers else None
                legs.append(VectorLeg(self.embedding, self.db.reads, speakers=speakers))
            elif name == "graph":
                legs.append(
                    GraphLeg(
                        self.db.reads,
                        self.graph,
                        max_entities=self.settings.graph_leg_entities,
                        facts_per_entity=self.settings.graph_leg_facts,
                    )
                )
        return legs

    @property
    def jobs_open(self) -> bool:
        return self._jobs_open

    async def _rederive(self, session_id: str) -> None:
        """A session forgetting rewrote: its vectors and graph written again by their jobs."""
        if self._jobs_open:
            await self.jobs.defer_embed(session_id)
            await self.jobs.defer_graph(session_id)
            await self.jobs.defer_embed_entities()

    @property
    def ready(self) -> bool:
        return self.schema_ready.is_set()

    async def _ingest(self, path: Path) -> None:
        await self.recorder.emit(
            CreatureName.OWL,
            EventType.METRIC,
            data={"file": path.name},
            reasoning=f"new lines in {path.name}",
        )
        await self.ingestor.ingest_file(path)

    async def _chronicle_stats(self) -> None:
        """The chronicler's own creature (narwhal): its counters once a minute; the auth
        gate's (basilisk): the requests it let through and refused since the last one; and
        PostgreSQL's (dragon): how busy the two pools are."""
        while True:
            await asyncio.sleep(self.settings.events_stats_interval_s)
            counts, self.auth_counts = self.auth_counts, Counter()
            if counts:
                await self.recorder.emit(
                    CreatureName.BASILISK, EventType.METRIC,
                    data={"passed": counts["passed"], "refused": counts["refused"],
                          "locked_out": counts["locked_out"]},
                    reasoning=f"{counts['passed']} requests let through, "
                    f"{counts['refused']} refused, {counts['locked_out']} locked out",
                )  # fmt: skip
            stats = self.chronicler.stats()
            await self.recorder.emit(
                CreatureName.NARWHAL, EventType.METRIC, data=stats,
                reasoning=f"{stats['recorded']} events recorded, {stats['subscribers']} "
                f"watching, {stats['backlog']} waiting for PostgreSQL",
            )  # fmt: skip
            pools = self.db.stats()
            await self.recorder.emit(
                CreatureName.DRAGON, EventType.METRIC, data=dict(pools),
                reasoning="; ".join(
                    f"{name} pool: {p.get('checked_out', '?')} of {p.get('size', '?')} in use"
                    for name, p in pools.items()
                ),
            )  # fmt: skip

    async def _read_events(self, path: Path) -> None:
        await self.event_files.read_file(path)

    async def _session_changed(self, session_id: str) -> None:
        # Without the job queue (CONTEXT_ENGINE_JOBS_ENABLED=false, or not open yet) there is
        # nothing to queue: the idle scan finalises the session once the queue runs.
        if self._jobs_open:
            await self.jobs.session_changed(session_id)

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
        self._tasks.append(asyncio.create_task(self._keep_health(), name="health-renewal"))

    async def _start(self) -> None:
        await migrate_until_done(self.settings, self.schema_ready)
        # The ring first (from PostgreSQL), so every event recorded from here on is streamed.
        await self.chronicler.start()
        self._tasks.append(asyncio.create_task(self._chronicle_stats(), name="chronicle-stats"))
        if self.settings.jobs_enabled:
            await self._open_jobs()
            self._tasks.append(
                asyncio.create_task(run_forever(self.jobs, self._stopping), name="job-worker")
            )
            self._tasks.append(
                asyncio.create_task(self._rescue_after_start(), name="jobs-rescue-at-start")
            )
        self._tasks.append(asyncio.create_task(self._warm_extractor(), name="extractor-warm-up"))
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
        await self.event_files.load_offsets()
        await self.events_watcher.start()
        self._watching_events = True
        self.started.set()
        self._freeze_heap()
        log.info("engine.started")

    async def _open_jobs(self) -> None:
        # PostgreSQL unreachable: retried, /health says why not meanwhile
        await retry_until_done(
            self.jobs.open, backoff=self.settings.backoff(0.5), log=log, event="jobs.open_retry"
        )
        self._jobs_open = True

    async def _rescue_after_start(self) -> None:
        """Jobs a killed worker held stay `doing` until its heartbeat is STALLED_AFTER_S old;
        the periodic rescue then takes up to 5 minutes more. Once that age is reached after a
        restart, rescue them at once: a SIGKILL costs seconds, not minutes (issue 11)."""
        await asyncio.sleep(STALLED_AFTER_S + 2)
        try:
            await self.jobs.rescue_stalled()
        except Exception as exc:  # the periodic rescue tries again
            log.warning("jobs.rescue_at_start_failed", error=repr(exc)[:300])

    async def _open_graph(self) -> None:
        """Indices and constraints, retried until the graph server answers; graph jobs that
        run before then fail and are retried by the queue."""
        assert self.graph is not None
        await retry_until_done(
            self.graph.open, backoff=self.settings.backoff(0.5), log=log, event="graph.open_retry"
        )
        log.info("graph.open", backend=self.settings.graph_backend)

    async def _open_vectors(self) -> None:
        """The vector index (in process by default: fast). A store that does not open (a
        Qdrant server down at start) leaves the vector leg reporting errors and embedding
        jobs retrying, never the engine down; it is retried in the background until it
        opens, then what was missed meanwhile is embedded."""
        assert self.embedding is not None
        try:
            await self.embedding.open()
        except Exception as exc:
            log.error("vectors.open_failed", error=repr(exc)[:500])
            self._tasks.append(asyncio.create_task(self._reopen_vectors(), name="vectors-open"))
            return
        await self._vectors_opened()

    async def _reopen_vectors(self) -> None:
        assert self.embedding is not None
        first = self.settings.backoff(0.5)
        await asyncio.sleep(first.delay(0))  # the first try failed in _open_vectors
        # then on from the second step: 0.5 s, 1 s, 2 s ... in all, not 0.5 s twice
        await retry_until_done(
            self.embedding.open,
            backoff=self.settings.backoff(first.step(1)),
            log=log,
            event="vectors.open_retry",
        )
        log.info("vectors.opened_after_retry")
        await self._vectors_opened()

    async def _vectors_opened(self) -> None:
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
        self._freeze_heap()  # the model's objects are long-lived too

    async def _warm_extractor(self) -> None:
        """The fast extractor's models (spaCy, VADER; hashes checked) loaded now, in the
        background, not in the first extraction job."""
        load = getattr(self.extractor, "load", None)
        if load is None:  # the LLM extractor holds no model
            return
        try:
            await asyncio.to_thread(load)
        except Exception as exc:  # the extract jobs fail and retry with the same reason
            log.error("extractor.load_failed", error=repr(exc)[:500])
            return
        self._freeze_heap()

    def _freeze_heap(self) -> None:
        """What is alive after start-up (modules, models, clients) lives as long as the
        process: move it out of the cyclic GC's reach (gc.freeze). A full collection over it
        paused the event loop ~120 ms at 1,000 events/s (bench/events); after this only
        objects made since are scanned. Off in tests, where engines come and go in one
        process (frozen cycles are never collected)."""
        if self.settings.gc_freeze:
            gc.collect()
            gc.freeze()

    async def stop(self) -> None:
        """Stop everything, in bounded time even when PostgreSQL is gone."""
        self._stopping.set()
        if self._watching:
            await self.watcher.stop()
        if self._watching_events:
            await self.events_watcher.stop()
        for task in reversed(self._tasks):
            task.cancel()
        if self._tasks:
            _, stuck = await asyncio.wait(self._tasks, timeout=STOP_TIMEOUT_S)
            for task in stuck:
                log.warning("engine.stop_abandoned", task=task.get_name())
        if self._jobs_open:  # opened by start(), after everything was built
            with suppress(Exception):
                async with asyncio.timeout(STOP_TIMEOUT_S):
                    await self.jobs.close()
        # Then every component, last built first: the chronicler writes what is pending
        # after everything else could still record events, the pools close last.
        for name, close in reversed(self._closers):
            try:
                async with asyncio.timeout(STOP_TIMEOUT_S):
                    await close()
            except Exception as exc:
                log.warning("engine.close_failed", component=name, error=repr(exc)[:300])

    async def stats(self) -> dict[str, Any]:
        """What the engine holds and serves without (GET /v1/stats): PostgreSQL's counts, the
        jobs, the keyword index, extraction and the graph, the vectors, the degraded layers."""
        async with self.db.main.connect() as conn:
            stats: dict[str, Any] = await engine_stats(conn)
        stats["jobs"] = await self.jobs.counts()
        index = self.search_index
        stats["keyword_index"] = {
            "backend": self.settings.keyword_backend,
            "ready": index is not None and index.ready,
            "documents": index.num_docs() if index is not None and index.ready else None,
        }
        graph = self.graph
        stats["extraction"] = {
            "extractor": self.extractor.label,
            "graph_backend": self.settings.graph_backend if graph is not None else None,
            "graph_mode": self.session_stages.graph_mode if graph is not None else None,
            "graph_open": graph is not None and graph.opened,
        }
        stats["vectors"] = (
            await self.embedding.counts()
            if self.embedding is not None
            else {"enabled": False, "space": None, "status": None, "embedded": 0,
                  "entities_embedded": 0, "searching": None}
        )  # fmt: skip
        stats["degraded"] = (await self.health()).degraded
        return stats

    async def healthy(self) -> bool:
        return self.ready and await ping(self.db.probe, self.settings.health_timeout_s)

    async def health(self) -> Health:
        """Ready (PostgreSQL answers, migrations done) and the layers served without. The
        last check's answer serves for up to twice `health_interval_s` and is renewed in the
        background every `health_interval_s`, so a probe is answered at once, even while
        searches keep the event loop busy (a check is several round trips, each waiting for
        a turn of the loop); a change of the engine's own state (started, the job queue, the
        vectors or the graph opened) is checked at once. Checks asked while one runs share it."""
        kept = self._health
        if kept is not None:
            at, state, found = kept
            fresh = time.monotonic() - at <= 2 * self.settings.health_interval_s
            if fresh and state == self._health_state():
                return found
        return await self._health_checks.get("health", self._renew_health)

    def _health_state(self) -> tuple[bool, ...]:
        return (
            self.ready,
            self._jobs_open,
            self.embedding is not None and self.embedding.opened,
            self.graph is not None and self.graph.opened,
        )

    async def _renew_health(self) -> Health:
        state = self._health_state()
        found = await self._check_health()
        self._health = (time.monotonic(), state, found)
        return found

    async def _keep_health(self) -> None:
        while True:
            try:
                await self._health_checks.get("health", self._renew_health)
            except Exception as exc:  # the next /health checks by itself
                log.warning("health.renew_failed", error=repr(exc)[:300])
            await asyncio.sleep(self.settings.health_interval_s)

    async def _check_health(self) -> Health:
        probes: dict[str, Probe] = {}
        if self.graph is not None:
            probes["graph"] = self.graph.healthy
        if self.embedding is not None:
            embedding = self.embedding

            async def vectors() -> bool:
                return embedding.opened and bool(await embedding.store.spaces())

            probes["vectors"] = vectors
        if self.settings.jobs_enabled:

            async def jobs() -> bool:
                return self._jobs_open

            probes["jobs"] = jobs
        return await check_health(
            started=self.ready,
            required=lambda: ping(self.db.probe, self.settings.health_timeout_s),
            probes=probes,
            outcomes=self.outcomes,
            timeout_s=self.settings.health_timeout_s,
        )
