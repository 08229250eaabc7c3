"""BM25 (keyword leg) latency of `GET /v1/context` over HTTP, on a loaded corpus.

Loads N segments spread over the past year (≤ 200k: JSONL files through the engine's
Ingestor; more: COPY straight into `sessions`/`segments` with the secondary indexes built
afterwards; the tsvector column is GENERATED either way), ends the sessions as the engine's
finalisation would, runs VACUUM ANALYZE, starts the real engine (uvicorn, default settings),
warms up, then sends a query set one request at a time with limit 5: single words, two and
three words drawn from the corpus vocabulary by their document frequency, rare names, quoted
phrases taken from the corpus, natural questions, and some with hours_back=168. Prints
p50/p95/p99 overall and per kind, mean result counts, the same queries' SQL time without
HTTP, and EXPLAIN (ANALYZE, BUFFERS) of the slowest query. Target: p95 ≤ 20 ms at 1M.

    uv run python bench/context_engine/bm25_latency.py --segments 100000
    uv run python bench/context_engine/bm25_latency.py --segments 1000000
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
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
    write_session_files,
)
from corpus import RARE_NAMES, PayloadFactory, SessionPlan, TextGenerator, spread_sessions
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
from rich.table import Table
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from context_engine.ingest.transcripts import Ingestor
from context_engine.search.legs.keyword import _SEARCH

TARGET_P95_MS = 20.0
STOP = set(
    "a an the i me my we our you your he she it its they them their is am are was were be been "
    "being have has had do does did to of in on at for with and or but so if then than that "
    "this these those there here what when where who why how which about into from by up out "
    "just very really not no yes yeah oh um okay right well anyway hey wait mean know s m ve "
    "d ll re t can could would should will won't i'm i've i'd it's let's that's we're don't "
    "can't didn't".split()
)


# --- loading ------------------------------------------------------------------------------


def segment_rows(plan: SessionPlan, gen: TextGenerator, rng: random.Random) -> list[tuple]:
    """Rows for COPY into segments: the same shape PayloadFactory gives (times, speakers)."""
    rows = []
    t = 0.0
    speaker = 0
    for i in range(plan.segments):
        body = gen.segment_text()
        if rng.random() < 0.6:
            speaker = (speaker + 1) % 2 if rng.random() < 0.9 else 2
        duration = max(0.6, len(body) / 15.0 + rng.uniform(-0.5, 1.0))
        start, end = round(t, 3), round(t + duration, 3)
        rows.append(
            (
                plan.session_id,
                f"seg-{i:06d}",
                f"SPEAKER_0{speaker}",
                body,
                start,
                end,
                plan.started_at + timedelta(seconds=start),
                "en",
                "whisper-large-v3",
                i // 12 * 2000,  # a plausible byte offset of the line
                1,
            )
        )
        t += duration + rng.uniform(0.1, 1.5)
    return rows


SEGMENT_COLUMNS = [
    "session_id", "segment_id", "speaker", "text", "start_s", "end_s", "spoken_at",
    "language", "stt_engine", "source_offset", "generation",
]  # fmt: skip


async def load_copy(engine: AsyncEngine, plans: list[SessionPlan], seed: int) -> None:
    """COPY sessions and segments; secondary indexes of segments dropped and rebuilt."""
    gen = TextGenerator(seed)
    rng = random.Random(seed + 3)
    async with engine.connect() as conn:
        indexes = (
            await conn.execute(
                text(
                    "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'segments' "
                    "AND indexname NOT IN (SELECT conname FROM pg_constraint)"
                )
            )
        ).all()
        await conn.commit()
        for name, _ in indexes:
            await conn.execute(text(f'DROP INDEX "{name}"'))
        await conn.commit()
        raw = (await conn.get_raw_connection()).driver_connection
        assert raw is not None
        await raw.copy_records_to_table(
            "sessions",
            records=[
                (p.session_id, p.device_id, p.started_at, p.started_at, None, 0) for p in plans
            ],
            columns=[
                "session_id", "device_id", "started_at", "last_spoken_at", "ended_at",
                "segments_count",
            ],
        )  # fmt: skip
        total = sum(p.segments for p in plans)
        with Progress(
            "COPY segments", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
        ) as progress:
            task = progress.add_task("", total=total)
            chunk: list[tuple] = []
            for plan in plans:
                chunk.extend(segment_rows(plan, gen, rng))
                if len(chunk) >= 20_000:
                    await raw.copy_records_to_table(
                        "segments", records=chunk, columns=SEGMENT_COLUMNS
                    )
                    progress.advance(task, len(chunk))
                    chunk = []
            if chunk:
                await raw.copy_records_to_table("segments", records=chunk, columns=SEGMENT_COLUMNS)
                progress.advance(task, len(chunk))
        with console.status(f"building {len(indexes)} indexes of segments"):
            await raw.execute("SET maintenance_work_mem = '1GB'")
            for name, ddl in indexes:
                t = time.perf_counter()
                await raw.execute(ddl)
                console.print(f"  {name}: {time.perf_counter() - t:.1f} s")


def write_jsonl(directory: Path, plans: list[SessionPlan], seed: int) -> list[Path]:
    return write_session_files(directory, plans, PayloadFactory(seed))[0]


async def load_ingest(engine: AsyncEngine, directory: Path, paths: list[Path]) -> None:
    """JSONL files through the engine's Ingestor (no job queue: finalisation is done below)."""
    ingestor = Ingestor(engine, directory)
    sem = asyncio.Semaphore(4)
    with Progress(
        "ingesting", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    ) as progress:
        task = progress.add_task("", total=len(paths))

        async def one(path: Path) -> None:
            async with sem:
                await ingestor.ingest_file(path)
            progress.advance(task)

        await asyncio.gather(*(one(p) for p in paths))


async def finish_load(engine: AsyncEngine) -> dict[str, Any]:
    """End every session as finalisation would (so the idle scan has nothing to do), then
    VACUUM ANALYZE; returns sizes."""
    async with engine.connect() as conn:
        await conn.execute(
            text(
                """
                UPDATE sessions s SET ended_at = x.last_end, last_spoken_at = x.last_end,
                       segments_count = x.n, updated_at = now()
                FROM (SELECT session_id, count(*) AS n,
                             max(spoken_at + make_interval(secs => end_s - start_s)) AS last_end
                      FROM segments GROUP BY session_id) x
                WHERE s.session_id = x.session_id
                """
            )
        )
        await conn.commit()
        raw = (await conn.get_raw_connection()).driver_connection
        assert raw is not None
        with console.status("VACUUM ANALYZE"):
            await raw.execute("VACUUM ANALYZE segments")
            await raw.execute("VACUUM ANALYZE sessions")
        row = (
            await conn.execute(
                text(
                    """
                    SELECT (SELECT count(*) FROM segments) AS segments,
                           (SELECT count(*) FROM sessions) AS sessions,
                           pg_table_size('segments') AS heap,
                           pg_indexes_size('segments') AS indexes,
                           pg_relation_size('ix_segments_tsv') AS gin,
                           (SELECT min(spoken_at) FROM segments) AS first,
                           (SELECT max(spoken_at) FROM segments) AS last,
                           current_setting('shared_buffers') AS shared_buffers,
                           current_setting('work_mem') AS work_mem
                    """
                )
            )
        ).one()
        return dict(row._mapping)


# --- queries ------------------------------------------------------------------------------

QUESTIONS = [
    "what did {name} say about the {thing}",
    "when did {name} go to {place}",
    "where did we have {food}",
    "who recommended the {venue} in {place}",
    "what happened with the {thing}",
    "when is {name}'s {thing}",
    "did {name} like {activity}",
    "what does my {role} think about the {thing}",
]


@dataclass
class Query:
    kind: str
    query: str
    hours_back: float | None = None
    ms: list[float] = field(default_factory=list)  # over HTTP, the engine as it is
    ms_custom: list[float] = field(default_factory=list)  # over HTTP, custom plans forced
    sql_ms: dict[str, float] = field(default_factory=dict)  # plan mode -> ms
    results: int = 0


def phrase(rng: random.Random, sentences: list[str]) -> list[str]:
    """2–3 consecutive words of a corpus sentence, at least two of them not stop words."""
    while True:
        tokens = re.findall(r"[A-Za-z']+", rng.choice(sentences))
        k = rng.choice((2, 3))
        if len(tokens) < k:
            continue
        i = rng.randrange(len(tokens) - k + 1)
        words = tokens[i : i + k]
        if sum(w.lower() not in STOP and len(w) > 2 for w in words) >= 2:
            return words


def build_queries(n: int, seed: int) -> list[Query]:
    """A seeded query mix. Words are drawn by their document frequency in a sample of the
    corpus (same generator), so frequent words are asked about more often."""
    gen = TextGenerator(seed)
    rng = random.Random(seed + 7)
    sample = [gen.segment_text() for _ in range(20_000)]
    df: Counter[str] = Counter()
    for s in sample:
        df.update({w for w in re.findall(r"[a-z']+", s.lower()) if w not in STOP and len(w) > 2})
    words, weights = zip(*df.items(), strict=True)
    cum = []
    acc = 0.0
    for w in weights:
        acc += w
        cum.append(acc)

    def word() -> str:
        return rng.choices(words, cum_weights=cum, k=1)[0]

    sentences = [s for t in sample for s in re.split(r"(?<=[.?!])\s+", t)]
    kinds = [
        ("1 word", 0.28),
        ("2 words", 0.17),
        ("3 words", 0.08),
        ("rare name", 0.10),
        ("phrase", 0.12),
        ("question", 0.15),
        ("1-2 words, hours_back=168", 0.10),
    ]
    out: list[Query] = []
    for _ in range(n):
        kind = rng.choices([k for k, _ in kinds], weights=[w for _, w in kinds])[0]
        if kind == "1 word":
            out.append(Query(kind, word()))
        elif kind == "2 words":
            out.append(Query(kind, f"{word()} {word()}"))
        elif kind == "3 words":
            out.append(Query(kind, f"{word()} {word()} {word()}"))
        elif kind == "rare name":
            name = rng.choice(RARE_NAMES)
            out.append(Query(kind, name if rng.random() < 0.7 else f"{name} {word()}"))
        elif kind == "phrase":
            out.append(Query(kind, '"' + " ".join(phrase(rng, sentences)) + '"'))
        elif kind == "question":
            q = rng.choice(QUESTIONS)
            p = gen.pick
            out.append(
                Query(
                    kind,
                    q.format(
                        name=gen.name(),
                        thing=p["thing"]().replace("_", " "),
                        place=p["place"](),
                        food=p["food"]().replace("_", " "),
                        venue=p["venue"](),
                        activity=p["activity"](),
                        role=p["role"](),
                    ),
                )
            )
        else:
            q = word() if rng.random() < 0.6 else f"{word()} {word()}"
            out.append(Query(kind, q, hours_back=168.0))
    return out


def run_http(
    engine: EngineProcess, queries: list[Query], rounds: int, label: str, custom: bool = False
) -> None:
    with (
        httpx.Client(base_url=engine.base_url, headers=engine.headers, timeout=60) as client,
        Progress(
            label, BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
        ) as progress,
    ):
        task = progress.add_task("", total=len(queries) * rounds)
        for _ in range(rounds):
            for q in queries:
                params: dict[str, Any] = {"query": q.query, "limit": 5}
                if q.hours_back is not None:
                    params["hours_back"] = q.hours_back
                t = time.perf_counter()
                r = client.get("/v1/context", params=params)
                (q.ms_custom if custom else q.ms).append((time.perf_counter() - t) * 1000)
                r.raise_for_status()
                q.results = len(r.json()["results"])
                progress.advance(task)


async def set_plan_cache_mode(url: str, mode: str | None) -> None:
    engine = make_engine(url, 1)
    try:
        async with engine.connect() as conn:
            db = (await conn.execute(text("SELECT current_database()"))).scalar_one()
            action = "RESET plan_cache_mode" if mode is None else f"SET plan_cache_mode = {mode}"
            await conn.execute(text(f'ALTER DATABASE "{db}" {action}'))
            await conn.commit()
    finally:
        await engine.dispose()


def _params(q: Query, as_of: datetime, k: int = 5) -> dict[str, Any]:
    since = None if q.hours_back is None else as_of - timedelta(hours=q.hours_back)
    return {"query": q.query, "as_of": as_of, "since": since, "k": k}


PLAN_MODES = ("auto", "force_custom_plan", "force_generic_plan")


async def sql_times(url: str, queries: list[Query]) -> None:
    """The engine's BM25 statement alone (no HTTP, no entity lookup), through SQLAlchemy and
    asyncpg as in the engine, so it is a prepared statement: after five runs PostgreSQL may
    switch it to a generic plan (`auto`, order-dependent). Also timed with custom and generic
    plans forced, one fresh connection per mode, queries in the same order."""
    for mode in PLAN_MODES:
        engine = make_engine(url, 1)
        try:
            async with engine.connect() as conn:
                if mode != "auto":
                    await conn.execute(text(f"SET plan_cache_mode = {mode}"))
                now = datetime.now(UTC)
                for q in queries:
                    t = time.perf_counter()
                    (await conn.execute(_SEARCH, _params(q, now))).all()
                    q.sql_ms[mode] = (time.perf_counter() - t) * 1000
        finally:
            await engine.dispose()


# Alternative formulations of the PostgreSQL keyword statement, timed on the same queries
# (`engine` is the fallback leg's statement; the others are not in the engine).
_FILTERS = """
      s.replaced_by IS NULL AND s.spoken_at <= :as_of
      AND (CAST(:since AS timestamptz) IS NULL OR s.spoken_at >= CAST(:since AS timestamptz))
"""
VARIANTS = {
    "engine: ts_rank_cd over every match": _SEARCH,
    "ts_rank (not _cd) over every match": text(
        f"""
        SELECT s.session_id, s.segment_id, s.text, s.speaker, s.spoken_at,
               ts_rank(s.tsv, q, 33) AS score
        FROM segments s, websearch_to_tsquery('english', :query) q
        WHERE s.tsv @@ q AND {_FILTERS}
        ORDER BY score DESC, s.spoken_at DESC, s.segment_id LIMIT :k
        """
    ),
    "ts_rank_cd over the 1,000 most recent matches": text(
        f"""
        SELECT c.session_id, c.segment_id, c.text, c.speaker, c.spoken_at,
               ts_rank_cd(c.tsv, c.q, 33) AS score
        FROM (SELECT s.*, q FROM segments s, websearch_to_tsquery('english', :query) q
              WHERE s.tsv @@ q AND {_FILTERS}
              ORDER BY s.spoken_at DESC LIMIT 1000) c
        ORDER BY score DESC, c.spoken_at DESC, c.segment_id LIMIT :k
        """
    ),
}


async def variant_times(url: str, queries: list[Query]) -> dict[str, list[float]]:
    engine = make_engine(url, 1)
    out: dict[str, list[float]] = {}
    try:
        async with engine.connect() as conn:
            await conn.execute(text("SET plan_cache_mode = force_custom_plan"))
            now = datetime.now(UTC)
            for name, stmt in VARIANTS.items():
                for q in queries[:20]:  # warm the statement
                    (await conn.execute(stmt, _params(q, now))).all()
                ms = []
                for q in queries:
                    t = time.perf_counter()
                    (await conn.execute(stmt, _params(q, now))).all()
                    ms.append((time.perf_counter() - t) * 1000)
                out[name] = ms
    finally:
        await engine.dispose()
    return out


def floor_times(engine: EngineProcess, n: int = 200) -> dict[str, list[float]]:
    """Fixed cost of a request: /health (no database) and a query that matches nothing."""
    out: dict[str, list[float]] = {"GET /health": [], "GET /v1/context, no match": []}
    with httpx.Client(base_url=engine.base_url, headers=engine.headers, timeout=60) as client:
        for _ in range(n):
            t = time.perf_counter()
            client.get("/health").raise_for_status()
            out["GET /health"].append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            client.get("/v1/context", params={"query": "zqxjkvbw", "limit": 5}).raise_for_status()
            out["GET /v1/context, no match"].append((time.perf_counter() - t) * 1000)
    return out


def print_ms_table(title: str, rows: dict[str, list[float]]) -> None:
    table = Table(title=title)
    for col in ("", "n", "p50", "p95", "p99", "max"):
        table.add_column(col, justify="left" if not col else "right")
    for name, ms in rows.items():
        table.add_row(
            name, str(len(ms)), f"{percentile(ms, 50):.1f}", f"{percentile(ms, 95):.1f}",
            f"{percentile(ms, 99):.1f}", f"{max(ms):.1f}",
        )  # fmt: skip
    console.print(table)


def _literal(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, datetime):
        return f"'{value.isoformat()}'::timestamptz"
    if isinstance(value, int):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"


async def explain(url: str, slow: list[Query], generic: Query | None) -> list[tuple[str, str]]:
    """EXPLAIN (ANALYZE, BUFFERS) of the PostgreSQL fallback statement for the slowest queries
    (custom plan, as a first execution gets), and for `generic` as a generic plan (what a prepared
    statement may switch to). Returns (title, plan)."""
    engine = make_engine(url, 1)
    out = []
    count = text("SELECT count(*) FROM segments WHERE tsv @@ websearch_to_tsquery('english', :q)")
    try:
        async with engine.connect() as conn:
            now = datetime.now(UTC)
            for q in slow:
                matches = (await conn.execute(count, {"q": q.query})).scalar_one()
                plan = await conn.execute(
                    text("EXPLAIN (ANALYZE, BUFFERS) " + _SEARCH.text), _params(q, now)
                )
                title = f"{q.query!r} [{q.kind}], {matches:,} matching rows, custom plan"
                out.append((title, "\n".join(r[0] for r in plan)))
            if generic is not None:
                p = _params(generic, now)
                sql = _SEARCH.text
                for i, name in enumerate(("query", "as_of", "since", "k"), 1):
                    sql = sql.replace(f":{name}", f"${i}")
                args = ", ".join(_literal(p[k]) for k in ("query", "as_of", "since", "k"))
                await conn.execute(text("SET plan_cache_mode = force_generic_plan"))
                await conn.execute(
                    text(f"PREPARE bm25 (text, timestamptz, timestamptz, int) AS {sql}")
                )
                plan = await conn.execute(text(f"EXPLAIN (ANALYZE, BUFFERS) EXECUTE bm25 ({args})"))
                title = f"{generic.query!r} [{generic.kind}], generic plan"
                out.append((title, "\n".join(r[0] for r in plan)))
                await conn.rollback()
    finally:
        await engine.dispose()
    return out


# --- main ---------------------------------------------------------------------------------


def main(
    segments: Annotated[int, typer.Option(help="segments in the corpus")] = 100_000,
    queries: Annotated[int, typer.Option(help="measured queries (≥ 200)")] = 300,
    warmup: Annotated[int, typer.Option(help="warm-up queries (not measured)")] = 100,
    rounds: Annotated[int, typer.Option(help="times the query set is sent")] = 1,
    load: Annotated[
        str, typer.Option(help="auto (ingest up to 200k, else copy) | ingest | copy")
    ] = "auto",
    sessions: Annotated[
        int | None, typer.Option(help="sessions (default: about 350 segments each)")
    ] = None,
    seed: Annotated[int, typer.Option(help="random seed of corpus and queries")] = 42,
    explain_top: Annotated[int, typer.Option(help="slowest queries to EXPLAIN ANALYZE")] = 5,
    compare: Annotated[
        bool,
        typer.Option(
            help="diagnosis: alternative SQL formulations, and the engine again with "
            "plan_cache_mode=force_custom_plan"
        ),
    ] = True,
    database_url: DatabaseUrlOption = None,
    keep: KeepOption = False,
    keyword_backend: Annotated[
        str, typer.Option(help="the engine's keyword leg: index (default) | postgres")
    ] = "index",
) -> None:
    if load not in ("auto", "ingest", "copy"):
        raise typer.BadParameter("--load must be auto, ingest or copy")
    method = ("ingest" if segments <= 200_000 else "copy") if load == "auto" else load
    print_header(f"context engine: BM25 latency, {segments:,} segments")
    logs = collect_logs()
    with workdir("heros-bench-bm25-", keep) as tmp:
        root = Path(tmp)
        with postgres(database_url, root) as pg_info:
            url = pg_info.url
            console.print(f"migrations: {migrate(url):.2f} s")
            now = datetime.now(UTC)
            plans = spread_sessions(
                segments,
                sessions or max(20, segments // 350),
                now - timedelta(days=366),
                timedelta(days=365),
                "bm25",
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
                f"{sizes['indexes'] / 1e6:.0f} MB (GIN {sizes['gin'] / 1e6:.0f} MB); "
                f"shared_buffers {sizes['shared_buffers']}, work_mem {sizes['work_mem']}"
            )
            qs = build_queries(queries, seed)
            warm = build_queries(warmup, seed + 1000)
            engine = EngineProcess(
                url,
                root / "transcripts",
                root / "events",
                root / "engine.log",
                extra_env={"CONTEXT_ENGINE_KEYWORD_BACKEND": keyword_backend},
            )
            with engine:
                console.print(
                    f"keyword backend: {keyword_backend}; index ready after "
                    f"{engine.index_ready_s:.1f} s (built from PostgreSQL at start)"
                )
                run_http(engine, warm, 1, "warm-up")
                run_http(engine, qs, rounds, "measuring")
                floor = floor_times(engine)
            asyncio.run(sql_times(url, qs))
            variants = asyncio.run(variant_times(url, qs)) if compare else {}
            if compare:
                # The same engine, unchanged, but every new connection to the database gets
                # plan_cache_mode=force_custom_plan (ALTER DATABASE ... SET): no generic plans.
                asyncio.run(set_plan_cache_mode(url, "force_custom_plan"))
                custom = EngineProcess(
                    url, root / "transcripts", root / "events", root / "engine-custom.log"
                )
                with custom:
                    run_http(custom, warm, 1, "warm-up (custom plans forced)", custom=True)
                    run_http(custom, qs, rounds, "measuring (custom plans forced)", custom=True)
                asyncio.run(set_plan_cache_mode(url, None))
            slow = sorted(qs, key=lambda q: -max(q.ms))[:explain_top]
            windowed = [q for q in qs if q.hours_back is not None]
            worst_generic = max(
                windowed or qs,
                key=lambda q: q.sql_ms["force_generic_plan"] - q.sql_ms["force_custom_plan"],
            )
            plans_out = asyncio.run(explain(url, slow, worst_generic))
            engine_log = engine.log_events()
            custom_log = custom.log_events() if compare else []

    report(qs, segments, rounds)
    print_ms_table("fixed cost of a request over HTTP (ms)", floor)
    if variants:
        print_ms_table(
            "SQL only, custom plans: the PostgreSQL fallback statement and alternatives (ms)",
            variants,
        )
    console.rule("slowest queries over HTTP (ms), their SQL time by plan mode")
    for q in slow:
        sql = "  ".join(f"{m} {q.sql_ms[m]:6.1f}" for m in PLAN_MODES)
        window = f" hours_back={q.hours_back:g}" if q.hours_back else ""
        console.print(
            f"{max(q.ms):7.1f} ms  sql: {sql}  [{q.kind}] {q.query!r}{window}",
            soft_wrap=True,
            markup=False,
        )
    for title, plan in plans_out:
        console.rule(f"EXPLAIN (ANALYZE, BUFFERS): {title}", style="dim")
        console.print(plan, soft_wrap=True, markup=False)
    report_log(engine_log)
    if custom_log:
        report_log(custom_log, "engine log (custom plans forced)")
    report_log(logs.events, "log of the loading (this process)")
    print_footer(pg)


def report(qs: list[Query], segments: int, rounds: int) -> None:
    table = Table(title=f"GET /v1/context latency, {segments:,} segments, limit 5 (ms)")
    for col in ("kind", "n", "p50", "p95", "p99", "max", "mean results"):
        table.add_column(col, justify="left" if col == "kind" else "right")
    sql = Table(title="SQL only (the PostgreSQL fallback leg, no HTTP): p95 by plan mode (ms)")
    for col in ("kind", *PLAN_MODES):
        sql.add_column(col, justify="left" if col == "kind" else "right")
    kinds = list(dict.fromkeys(q.kind for q in qs))
    for kind in [*kinds, "all"]:
        items = qs if kind == "all" else [q for q in qs if q.kind == kind]
        ms = [m for q in items for m in q.ms]
        b = "[bold]" if kind == "all" else ""
        table.add_row(
            f"{b}{kind}", f"{b}{len(ms)}", f"{b}{percentile(ms, 50):.1f}",
            f"{b}{percentile(ms, 95):.1f}", f"{b}{percentile(ms, 99):.1f}", f"{max(ms):.1f}",
            f"{sum(q.results for q in items) / len(items):.2f}",
        )  # fmt: skip
        sql.add_row(
            f"{b}{kind}",
            *(f"{percentile([q.sql_ms[m] for q in items], 95):.1f}" for m in PLAN_MODES),
        )
    console.print(table)
    if all(q.ms_custom for q in qs):
        cmp = Table(
            title="over HTTP: the engine as it is vs the same engine with "
            "plan_cache_mode=force_custom_plan (ms)"
        )
        for col in ("kind", "p50 as is", "p95 as is", "p50 custom", "p95 custom"):
            cmp.add_column(col, justify="left" if col == "kind" else "right")
        for kind in [*kinds, "all"]:
            items = qs if kind == "all" else [q for q in qs if q.kind == kind]
            ms = [m for q in items for m in q.ms]
            mc = [m for q in items for m in q.ms_custom]
            cmp.add_row(
                kind, f"{percentile(ms, 50):.1f}", f"{percentile(ms, 95):.1f}",
                f"{percentile(mc, 50):.1f}", f"{percentile(mc, 95):.1f}",
            )  # fmt: skip
        console.print(cmp)
    console.print(sql)
    p95 = percentile([m for q in qs for m in q.ms], 95)
    verdict = "met" if p95 <= TARGET_P95_MS else "MISSED"
    console.print(
        f"target: p95 ≤ {TARGET_P95_MS:.0f} ms at 1M segments; at {segments:,}: {verdict} "
        f"(p95 {p95:.1f} ms)"
    )


if __name__ == "__main__":
    typer.run(main)
