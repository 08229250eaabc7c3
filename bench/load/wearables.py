"""Load: simulated wearables sending transcripts (and audio) while retrieval clients query.

The real services, each in its own process: the audio pipeline (`python -m audio_pipeline`,
default settings, with a webhook token) and the context engine (`python -m context_engine`,
default settings but `session_gap_s`, so that the sessions the wearables end are finalised,
extracted and graphed during the run) on a throwaway embedded PostgreSQL and FalkorDB, both
services on one transcripts volume.

- `--wearables` (10) simulated wearables post their own transcripts to the audio pipeline's
  Omi-compatible webhook (`POST /webhook/transcript?uid=…&session_id=…&token=…`): one
  segment every 2–6 s (a LoCoMo turn, as a person would say it, with a unique nonsense word
  appended), conversations of 10–40 segments, then 5–20 s of quiet and a new session.
  `--audio N` makes N of them stream real speech instead (`POST /webhook/audio`, raw PCM16 in
  2 s chunks at real time, the WAVs of ../shared/data/speech in turn), which the pipeline
  transcribes with Whisper on the CPU.
- Time to searchable: from the moment a wearable sent a segment to the moment `GET
  /v1/context` returns it. One poller asks for every pending nonsense word at once (`tok1 or
  tok2 …`, `legs=bm25`: only the keyword leg can match a nonsense word, and asking it alone
  keeps the poller's own load small) every `--poll-s`.
- `--clients` (2) retrieval clients ask LoCoMo questions through `GET /v1/context` (fused,
  limit 5) back to back.
- Every `--sample-s` (5 s): `/health` of both services and the memory of the engine, the audio
  pipeline (RSS), PostgreSQL (PSS summed over its processes, so shared buffers count once;
  and split into its processes' private memory, USS, and the shared rest, PSS − USS)
  and FalkorDB (RSS).

At the end the wearables stop; when every segment sent is searchable, a quiet phase
(`--quiet-minutes`, 5) begins: the retrieval clients go on asking, nothing new is sent, and
memory is still sampled. Then the benchmark waits until PostgreSQL holds every segment sent
and each has its vector, and asks the engine's drift check (`GET /v1/check`). Prints errors
per endpoint (any non-2xx or exception), time to searchable p50/p95/p99/max, retrieval
latency, memory (start, peak, end of the load, slope over its second half, MiB per 1,000
segments stored, and the slope over the quiet phase after its first minute), the health
seen, the counts, and PASS/FAIL against the targets: zero errors, bounded memory, time to
searchable p95 ≤ 1.5 s (the target of bench/context_engine/time_to_searchable.py, without
load). Bounded memory: no process grows by more than 5 % over the quiet phase (PostgreSQL's
private memory included), and PostgreSQL's shared part stays within its `shared_buffers`
(plus 32 MiB of shared libraries). While segments
arrive, every store grows with what it holds (the engine keeps the keyword index and the
vectors' HNSW graph in process): that growth is reported per segment stored, and a leak is
what goes on growing once nothing new arrives while the same queries are served.

    uv run python bench/load/wearables.py [--minutes 10] [--wearables 10] [--audio 0]
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import httpx
import numpy as np
import psutil
import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from sqlalchemy import text

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "context_engine"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "locomo"))
from common import (
    TOKEN,
    DatabaseUrlOption,
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
    unique_token,
    workdir,
)
from locomo_recall import falkordb

TTS_TARGET_S = 1.5
BOUNDED_GROWTH = 0.05  # growth over the quiet phase, as a share of its mean: "bounded" below
QUIET_SETTLE_S = 60.0  # the quiet phase's first minute: sessions end, their stages finish
# PostgreSQL's PSS split: what its processes hold privately (a leak would grow it), and its
# share of shared memory — mostly `shared_buffers` pages as backends touch them, bounded by
# that setting (checked against it rather than against the quiet phase).
PG_TOTAL = "PostgreSQL (PSS)"
PG_PRIVATE = "PostgreSQL private (USS)"
PG_SHARED = "PostgreSQL shared (PSS − USS)"
SHARED_SLACK_MIB = 32.0  # beyond shared_buffers: the binary's and libraries' shared pages
CHUNK_S = 2.0  # audio wearables: seconds of PCM16 per webhook request
PROBE_TIMEOUT_S = 120.0
POLL_BATCH = 25  # tokens per poll: "zq… or zq…" stays under the 512-character query limit
WEBHOOK_TOKEN = "bench-webhook-" + "y" * 18


# --- what the wearables say and the clients ask ---------------------------------------------


def load_locomo(path: Path) -> tuple[list[str], list[str]]:
    """(turns, questions) of the LoCoMo dev conversations."""
    data = json.loads(path.read_text())
    turns, questions = [], []
    for item in data:
        for key, value in item["conversation"].items():
            if key.startswith("session_") and isinstance(value, list):
                turns += [t["text"].strip() for t in value if t.get("text", "").strip()]
        questions += [qa["question"] for qa in item["qa"]]
    return turns, questions


def load_speech(directory: Path) -> list[tuple[str, bytes]]:
    """Every WAV under `directory` as 16 kHz mono PCM16 bytes."""
    import soundfile

    clips = []
    for path in sorted(directory.rglob("*.wav")):
        samples, rate = soundfile.read(path, dtype="float32", always_2d=True)
        if rate != 16000:
            raise typer.BadParameter(f"{path}: {rate} Hz, expected 16000")
        pcm = (np.clip(samples.mean(axis=1), -1, 1) * 32767).astype("<i2")
        clips.append((path.name, pcm.tobytes()))
    return clips


# --- bookkeeping ----------------------------------------------------------------------------


@dataclass
class Endpoint:
    ok: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    seconds: list[float] = field(default_factory=list)


@dataclass
class Probe:
    token: str
    session_id: str
    segment_id: str
    sent: float  # perf_counter when the webhook request was sent
    found: float | None = None


@dataclass
class Load:
    endpoints: dict[str, Endpoint] = field(default_factory=lambda: defaultdict(Endpoint))
    probes: list[Probe] = field(default_factory=list)
    pending: dict[str, Probe] = field(default_factory=dict)
    sent_segments: int = 0
    sessions: set[str] = field(default_factory=set)
    audio_s: float = 0.0
    audio_sessions: set[str] = field(default_factory=set)
    degraded_answers: int = 0
    health: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    memory: dict[str, list[tuple[float, float]]] = field(default_factory=lambda: defaultdict(list))
    stop: asyncio.Event = field(default_factory=asyncio.Event)  # the wearables stop
    done: asyncio.Event = field(default_factory=asyncio.Event)  # the retrieval clients stop
    quiet_from: float | None = None  # seconds from the start when nothing more was sent

    async def request(
        self, name: str, client: httpx.AsyncClient, method: str, url: str, **kw: Any
    ) -> httpx.Response | None:
        """One request, its latency and outcome recorded under `name`; None when it failed."""
        ep = self.endpoints[name]
        t = time.perf_counter()
        try:
            r = await client.request(method, url, **kw)
        except httpx.HTTPError as exc:
            ep.errors[type(exc).__name__] += 1
            return None
        ep.seconds.append(time.perf_counter() - t)
        if not 200 <= r.status_code < 300:
            ep.errors[f"HTTP {r.status_code}: {r.text[:120]}"] += 1
            return None
        ep.ok += 1
        return r

    @property
    def error_count(self) -> int:
        return sum(sum(ep.errors.values()) for ep in self.endpoints.values())


async def pause(load: Load, seconds: float) -> None:
    """Sleep, or less when the run stops."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(load.stop.wait(), max(0.0, seconds))


# --- the actors -------------------------------------------------------------------------------


async def transcript_wearable(
    n: int, client: httpx.AsyncClient, load: Load, turns: list[str], rng: random.Random
) -> None:
    uid = f"wearable-{n:02d}"
    conversation = 0
    await pause(load, rng.uniform(0, 4))  # not all in step
    while not load.stop.is_set():
        conversation += 1
        session_id = f"{uid}-c{conversation:03d}"
        load.sessions.add(session_id)
        began = time.perf_counter()
        for k in range(rng.randint(10, 40)):
            if load.stop.is_set():
                return
            token = unique_token()
            words = rng.choice(turns)
            duration = max(1.5, 0.4 * len(words.split()))
            segment = {
                "id": f"s{k:03d}",
                "text": f"{words} {token}",
                "speaker_id": k % 2,
                "is_user": k % 2 == 0,
                # Sent as it ends, as a wearable does: its times follow the clock (a segment
                # stamped in the future is not returned by /v1/context until then).
                "start": round(max(0.0, time.perf_counter() - began - duration), 3),
                "end": round(time.perf_counter() - began, 3),
            }
            probe = Probe(token, session_id, f"w-s{k:03d}", time.perf_counter())
            r = await load.request(
                "POST /webhook/transcript", client, "POST", "/webhook/transcript",
                params={"uid": uid, "session_id": session_id, "token": WEBHOOK_TOKEN},
                json={"segments": [segment]},
            )  # fmt: skip
            if r is not None and r.json().get("written") == 1:
                load.sent_segments += 1
                load.probes.append(probe)
                load.pending[token] = probe
            await pause(load, rng.uniform(2.0, 6.0) - (time.perf_counter() - probe.sent))
        await pause(load, rng.uniform(5.0, 20.0))  # the conversation is over


async def audio_wearable(
    n: int,
    client: httpx.AsyncClient,
    load: Load,
    clips: list[tuple[str, bytes]],
    rng: random.Random,
) -> None:
    """Real speech at real time: each clip in 2 s chunks, then a few seconds of nothing."""
    uid = f"audio-wearable-{n:02d}"
    chunk = int(CHUNK_S * 16000) * 2
    index = n
    await pause(load, rng.uniform(0, CHUNK_S))
    while not load.stop.is_set():
        _, pcm = clips[index % len(clips)]
        index += 1
        next_at = time.perf_counter()
        for i in range(0, len(pcm), chunk):
            if load.stop.is_set():
                return
            data = pcm[i : i + chunk]
            r = await load.request(
                "POST /webhook/audio", client, "POST", "/webhook/audio",
                params={"uid": uid, "sample_rate": "16000", "token": WEBHOOK_TOKEN},
                content=data, headers={"Content-Type": "application/octet-stream"},
            )  # fmt: skip
            if r is not None:
                load.audio_s += len(data) / 32000
                load.audio_sessions.add(r.json()["session_id"])
            next_at += len(data) / 32000
            await pause(load, next_at - time.perf_counter())
        await pause(load, rng.uniform(3.0, 12.0))


async def retrieval_client(
    client: httpx.AsyncClient, load: Load, questions: list[str], rng: random.Random
) -> None:
    while not load.done.is_set():
        r = await load.request(
            "GET /v1/context (clients)", client, "GET", "/v1/context",
            params={"query": rng.choice(questions)[:512], "limit": "5"},
        )  # fmt: skip
        if r is not None and r.json().get("degraded"):
            load.degraded_answers += 1


async def poller(client: httpx.AsyncClient, load: Load, interval_s: float) -> None:
    """Every pending token in one keyword query per tick, until the run stopped and none is
    pending (or the last ones timed out)."""
    while not (load.stop.is_set() and not load.pending):
        tick = time.perf_counter()
        waiting = list(load.pending.values())
        for i in range(0, len(waiting), POLL_BATCH):
            chunk = waiting[i : i + POLL_BATCH]
            r = await load.request(
                "GET /v1/context (poller)", client, "GET", "/v1/context",
                params={"query": " or ".join(p.token for p in chunk), "limit": "50",
                        "legs": "bm25"},
            )  # fmt: skip
            got = time.perf_counter()
            if r is None:
                continue
            hits = {(x["source_session"], x["segment_id"]) for x in r.json()["results"]}
            for p in chunk:
                if (p.session_id, p.segment_id) in hits:
                    p.found = got
                    load.pending.pop(p.token, None)
        for p in list(load.pending.values()):
            if time.perf_counter() > p.sent + PROBE_TIMEOUT_S:
                load.pending.pop(p.token, None)
        await asyncio.sleep(max(0.0, interval_s - (time.perf_counter() - tick)))


# --- watching the processes -------------------------------------------------------------------


def process_groups(engine: EngineProcess, audio: subprocess.Popen[bytes], pgdata: Path | None):
    """name → function returning the current psutil processes of that service."""

    def one(pid: int):
        return lambda: [psutil.Process(pid)]

    def postgres_tree():
        pid = int((pgdata / "postmaster.pid").read_text().split()[0])  # type: ignore[operator]
        main = psutil.Process(pid)
        return [main, *main.children(recursive=True)]

    def falkordb_proc():
        return [p for p in psutil.Process().children(recursive=True) if p.name() == "redis-server"]

    assert engine.proc is not None
    groups = {"context engine": one(engine.proc.pid), "audio pipeline": one(audio.pid)}
    if pgdata is not None:
        groups[PG_TOTAL] = postgres_tree  # sampled as three rows: memory_mib
    groups["FalkorDB"] = falkordb_proc
    return groups


def memory_mib(name: str, procs: list[psutil.Process]) -> dict[str, float]:
    """A group's memory row(s): RSS, or for PostgreSQL its PSS and that split into private
    (USS) and shared (PSS − USS), from one read of each process's smaps."""
    if name != PG_TOTAL:
        rss = 0
        for p in procs:
            with contextlib.suppress(psutil.Error):
                rss += p.memory_info().rss
        return {name: rss / 2**20}
    pss = uss = 0
    for p in procs:
        with contextlib.suppress(psutil.Error):
            full = p.memory_full_info()
            pss, uss = pss + full.pss, uss + full.uss
    return {PG_TOTAL: pss / 2**20, PG_PRIVATE: uss / 2**20, PG_SHARED: (pss - uss) / 2**20}


def cpu_seconds(procs: list[psutil.Process]) -> float:
    total = 0.0
    for p in procs:
        with contextlib.suppress(psutil.Error):
            t = p.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
    return total


async def sampler(
    load: Load,
    engine_client: httpx.AsyncClient,
    audio_client: httpx.AsyncClient,
    groups: dict,
    interval_s: float,
    t0: float,
) -> None:
    while True:
        tick = time.perf_counter()
        for name, client in (("context engine", engine_client), ("audio pipeline", audio_client)):
            try:
                r = await client.get("/health", timeout=10)
                body = r.json()
                status = body.get("status", "?")
                if body.get("degraded"):
                    status += " (" + ", ".join(body["degraded"]) + ")"
                load.health[name][f"{r.status_code} {status}"] += 1
            except (httpx.HTTPError, ValueError) as exc:
                load.health[name][type(exc).__name__] += 1
        for name, procs in groups.items():
            with contextlib.suppress(psutil.Error, OSError, ValueError):
                rows = await asyncio.to_thread(memory_mib, name, procs())
                for row, mib in rows.items():
                    load.memory[row].append((tick - t0, mib))
        await asyncio.sleep(max(0.0, interval_s - (time.perf_counter() - tick)))


# --- the audio pipeline process -------------------------------------------------------------


def start_audio_pipeline(root: Path, transcripts: Path, events: Path, log_path: Path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUDIO_PIPELINE_")}
    env.update(
        {
            "AUDIO_PIPELINE_HOST": "127.0.0.1",
            "AUDIO_PIPELINE_PORT": str(port),
            "AUDIO_PIPELINE_INTERNAL_TOKEN": TOKEN,
            "AUDIO_PIPELINE_WEBHOOK_TOKEN": WEBHOOK_TOKEN,
            "AUDIO_PIPELINE_TRANSCRIPTS_DIR": str(transcripts),
            "AUDIO_PIPELINE_EVENTS_DIR": str(events),
            "AUDIO_PIPELINE_SPOOL_DIR": str(root / "spool"),
            "AUDIO_PIPELINE_ENROLLMENT_DIR": str(root / "enrollment"),
            "AUDIO_PIPELINE_MODELS_DIR": str(root / "models"),
            "AUDIO_PIPELINE_LOG_FORMAT": "json",
        }
    )
    log = log_path.open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "audio_pipeline"], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    log.close()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    with console.status("starting the audio pipeline (its models load in the background)"):
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"audio pipeline exited with {proc.returncode}:\n"
                    + log_path.read_text(errors="replace")[-3000:]
                )
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    return proc, url
            if time.monotonic() > deadline:
                proc.kill()
                raise TimeoutError("audio pipeline not ready after 300 s")
            time.sleep(0.2)


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def log_events(path: Path) -> list[dict]:
    events = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            events.append({"level": "raw", "event": line[:300]})
    return events


# --- the run ----------------------------------------------------------------------------------


_COUNTS = text(
    """
    SELECT
      (SELECT count(*) FROM segments WHERE session_id LIKE 'wearable-%') AS transcript_segments,
      (SELECT count(*) FROM segments WHERE session_id LIKE 'audio-wearable-%') AS audio_segments,
      (SELECT count(*) FROM segments WHERE replaced_by IS NULL) AS active,
      (SELECT count(*) FROM segment_vectors) AS vectors,
      (SELECT count(*) FROM sessions) AS sessions,
      (SELECT count(*) FROM sessions WHERE ended_at IS NOT NULL) AS ended,
      (SELECT count(*) FROM session_stages WHERE stage = 'extract' AND status = 'done')
        AS extracted,
      (SELECT count(*) FROM session_stages WHERE stage = 'graph' AND status = 'done') AS graphed,
      (SELECT count(*) FROM session_stages WHERE status = 'failed') AS failed
    """
)


async def counts(database_url: str) -> dict[str, int]:
    engine = make_engine(database_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            return dict((await conn.execute(_COUNTS)).one()._mapping)
    finally:
        await engine.dispose()


async def drive(
    engine: EngineProcess,
    audio_url: str,
    groups: dict,
    *,
    minutes: float,
    wearables: int,
    audio: int,
    clients: int,
    turns: list[str],
    questions: list[str],
    clips: list[tuple[str, bytes]],
    poll_s: float,
    sample_s: float,
    quiet_minutes: float,
    seed: int,
) -> tuple[Load, float, dict[str, float]]:
    load = Load()
    rng = random.Random(seed)
    # An idle connection is dropped before uvicorn's 5 s keep-alive timeout can close it under
    # a request (that race shows as RemoteProtocolError, a client artefact).
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64, keepalive_expiry=2.0)
    async with (
        httpx.AsyncClient(base_url=audio_url, limits=limits, timeout=60) as hooks,
        httpx.AsyncClient(
            base_url=engine.base_url, headers=engine.headers, limits=limits, timeout=60
        ) as api,
    ):
        t0 = time.perf_counter()
        cpu0 = {
            name: await asyncio.to_thread(cpu_seconds, procs()) for name, procs in groups.items()
        }
        watch = asyncio.create_task(sampler(load, api, hooks, groups, sample_s, t0))
        actors = [
            asyncio.create_task(
                audio_wearable(n, hooks, load, clips, random.Random(rng.random()))
                if n < audio
                else transcript_wearable(n, hooks, load, turns, random.Random(rng.random()))
            )
            for n in range(wearables)
        ]
        actors += [
            asyncio.create_task(retrieval_client(api, load, questions, random.Random(rng.random())))
            for _ in range(clients)
        ]
        poll = asyncio.create_task(poller(api, load, poll_s))
        total = minutes * 60
        with Progress(
            TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
            TextColumn("{task.fields[status]}"), console=console,
        ) as progress:  # fmt: skip
            task = progress.add_task("load", total=total, status="")
            while (elapsed := time.perf_counter() - t0) < total:
                mem = load.memory.get("context engine")
                queries = load.endpoints["GET /v1/context (clients)"].ok
                progress.update(
                    task,
                    completed=elapsed,
                    status=f"{load.sent_segments} segments sent, {len(load.pending)} pending, "
                    f"{queries} queries, {load.error_count} errors"
                    + (f", engine {mem[-1][1]:.0f} MiB" if mem else ""),
                )
                await asyncio.sleep(1.0)
            progress.update(task, completed=total)
        load.stop.set()
        await asyncio.gather(*actors[:wearables])
        with console.status("waiting for the last segments to become searchable"):
            await poll
        load.quiet_from = time.perf_counter() - t0
        with console.status(
            f"quiet phase: {quiet_minutes:g} min of queries and nothing sent (memory sampled)"
        ):
            await asyncio.sleep(quiet_minutes * 60)
        load.done.set()
        await asyncio.gather(*actors[wearables:])
        run_s = time.perf_counter() - t0  # the load and the quiet phase
        cpu = {
            name: (await asyncio.to_thread(cpu_seconds, procs())) - cpu0[name]
            for name, procs in groups.items()
        }
        watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watch
    return load, run_s, cpu


async def drain(database_url: str, expected: int, timeout_s: float) -> dict[str, int]:
    """Until PostgreSQL has every transcript segment sent and every active segment a vector."""
    started = time.monotonic()
    with console.status("waiting until PostgreSQL and the vectors hold every segment") as status:
        while True:
            c = await counts(database_url)
            status.update(
                f"waiting: {c['transcript_segments']}/{expected} segments in PostgreSQL, "
                f"{c['vectors']}/{c['active']} embedded"
            )
            if c["transcript_segments"] >= expected and c["vectors"] >= c["active"]:
                return c
            if time.monotonic() - started > timeout_s:
                console.print(f"[red]not drained after {timeout_s:.0f} s[/]")
                return c
            await asyncio.sleep(1.0)


def slope_per_min(samples: list[tuple[float, float]]) -> float:
    if len(samples) < 3:
        return float("nan")
    t, v = np.array(samples).T
    return float(np.polyfit(t, v, 1)[0] * 60)


def growth_of(samples: list[tuple[float, float]]) -> float:
    """Growth over the samples' span by their linear trend, as a share of their mean."""
    if len(samples) < 3:
        return float("nan")
    span_min = (samples[-1][0] - samples[0][0]) / 60
    return slope_per_min(samples) * span_min / float(np.mean([v for _, v in samples]))


def report(
    load: Load,
    run_s: float,
    cpu: dict[str, float],
    store: dict[str, int],
    check: dict | None,
    shared_buffers_mib: float,
) -> dict[str, bool]:
    table = Table(title=f"requests over {run_s / 60:.1f} min (the load, then the quiet phase)")
    for col in ("endpoint", "ok", "errors", "p50 ms", "p95 ms", "p99 ms", "max ms", "req/s"):
        table.add_column(col, justify="left" if col == "endpoint" else "right")
    for name, ep in sorted(load.endpoints.items()):
        s = [x * 1000 for x in ep.seconds]
        table.add_row(
            name, str(ep.ok), str(sum(ep.errors.values())),
            *(f"{percentile(s, p):.1f}" for p in (50, 95, 99)), f"{max(s, default=0):.1f}",
            f"{len(s) / run_s:.1f}",
        )  # fmt: skip
    console.print(table)
    for name, ep in load.endpoints.items():
        for what, n in ep.errors.most_common(5):
            console.print(f"[red]error[/] {name}: {n} × {what}")
    console.print(f"answers with a degraded leg (clients): {load.degraded_answers}")

    found = [p.found - p.sent for p in load.probes if p.found is not None]
    missed = len(load.probes) - len(found)
    tts = Table(title="time to searchable: webhook sent → returned by /v1/context (s)")
    for col in ("segments", "found", "not found", "p50", "p95", "p99", "max"):
        tts.add_column(col, justify="right")
    tts.add_row(
        str(len(load.probes)), str(len(found)), str(missed),
        *(f"{percentile(found, p):.3f}" for p in (50, 95, 99)), f"{max(found, default=0):.3f}",
    )  # fmt: skip
    console.print(tts)

    mem = Table(title="memory (MiB), sampled every few seconds: under load, then quiet")
    for col in ("process", "samples", "start", "peak", "end of load", "2nd-half growth",
                "MiB per 1k segments", "quiet: end", "quiet slope MiB/min", "quiet growth",
                "CPU s (share of run)"):  # fmt: skip
        mem.add_column(col, justify="left" if col == "process" else "right")
    bounded = True
    caps: list[str] = []
    quiet_from = load.quiet_from if load.quiet_from is not None else float("inf")
    for name, samples in load.memory.items():
        loaded = [(t, v) for t, v in samples if t < quiet_from] or samples
        quiet = [(t, v) for t, v in samples if t >= quiet_from + QUIET_SETTLE_S]
        values = [v for _, v in loaded]
        per_k = (values[-1] - values[0]) / max(1, load.sent_segments) * 1000
        measured = len(quiet) >= 3
        if name == PG_SHARED:  # bounded by shared_buffers, whatever its trend
            cap = shared_buffers_mib + SHARED_SLACK_MIB
            peak = max(v for _, v in samples)
            ok = peak <= cap
            caps.append(f"{name}: peak {peak:.0f} MiB ≤ {cap:.0f}: {ok}")
        elif name == PG_TOTAL:  # the sum of the two rows below it: judged there
            ok = True
        else:
            ok = measured and not growth_of(quiet) > BOUNDED_GROWTH
        bounded &= ok
        mem.add_row(
            name, str(len(samples)), f"{values[0]:.0f}", f"{max(values):.0f}", f"{values[-1]:.0f}",
            f"{growth_of(loaded[len(loaded) // 2 :]):+.1%}", f"{per_k:+.2f}",
            f"{quiet[-1][1]:.0f}" if quiet else "—", f"{slope_per_min(quiet):+.2f}",
            (f"{growth_of(quiet):+.1%}" if measured else "too short")
            + ("" if ok else " [red]growing[/]"),
            f"{cpu[name]:.0f} ({cpu[name] / run_s:.0%})" if name in cpu else "—",  # per process
        )  # fmt: skip
    console.print(mem)
    for line in caps:
        console.print(
            f"{line} (shared_buffers {shared_buffers_mib:.0f} MiB + {SHARED_SLACK_MIB:.0f})"
        )
    for name, statuses in load.health.items():
        console.print(
            f"/health of the {name}: " + ", ".join(f"{k} × {n}" for k, n in statuses.items())
        )

    console.print(
        f"sent: {load.sent_segments} transcript segments in {len(load.sessions)} sessions"
        + (
            f"; {load.audio_s:.0f} s of audio in {len(load.audio_sessions)} sessions"
            if load.audio_s
            else ""
        )
    )
    console.print(f"PostgreSQL: {store}")
    matched = (
        store["transcript_segments"] == load.sent_segments
        and store["vectors"] == store["active"]
        and store["failed"] == 0
    )
    console.print(
        f"stores: transcript segments in PostgreSQL {store['transcript_segments']} = sent "
        f"{load.sent_segments}: {store['transcript_segments'] == load.sent_segments}; vectors "
        f"{store['vectors']} = active segments {store['active']}: "
        f"{store['vectors'] == store['active']}; failed stages: {store['failed']}"
    )
    if check is not None:
        drift = {k: v["count"] for k, v in check["drift"].items() if v["count"]}
        console.print(
            f"GET /v1/check: drift_total {check['drift_total']} {drift or ''}, counts "
            f"{check['counts']}, pending {check['pending']}, skipped {check['skipped']}, "
            f"{check['seconds']:.1f} s"
        )
        matched &= check["drift_total"] == 0
    p95 = percentile(found, 95)
    return {
        "zero errors": load.error_count == 0 and missed == 0,
        "bounded memory": bounded,
        f"time to searchable p95 ≤ {TTS_TARGET_S} s": p95 <= TTS_TARGET_S,
        "stores match": matched,
    }


def main(
    minutes: Annotated[float, typer.Option(help="how long the wearables send")] = 10.0,
    wearables: Annotated[int, typer.Option(help="simulated wearables")] = 10,
    audio: Annotated[int, typer.Option(help="of them, how many stream real audio")] = 0,
    clients: Annotated[int, typer.Option(help="retrieval clients, back to back")] = 2,
    poll_s: Annotated[float, typer.Option(help="seconds between two polls")] = 0.1,
    sample_s: Annotated[float, typer.Option(help="seconds between health/memory samples")] = 5.0,
    quiet_minutes: Annotated[
        float, typer.Option(help="minutes of queries with nothing sent, after the load")
    ] = 5.0,
    session_gap_s: Annotated[
        float, typer.Option(help="the engine's session_gap_s: silence that ends a session")
    ] = 60.0,
    graph: Annotated[bool, typer.Option(help="run FalkorDB (the graph stage and leg)")] = True,
    data: Annotated[Path, typer.Option(help="evaluation data")] = Path("../shared/data"),
    drain_timeout: Annotated[float, typer.Option(help="seconds to wait for the stores")] = 600,
    seed: Annotated[int, typer.Option()] = 7,
    database_url: DatabaseUrlOption = None,
    keep: KeepOption = False,
) -> None:
    if not 0 <= audio <= wearables:
        raise typer.BadParameter("--audio must be between 0 and --wearables")
    locomo = data / "locomo" / "locomo-dev.json"
    if not locomo.is_file():
        console.print(f"[yellow]skipped: {locomo} not found (see ../shared/data/README.md)[/]")
        raise typer.Exit(0)
    print_header("load: simulated wearables and retrieval clients")
    turns, questions = load_locomo(locomo)
    clips = load_speech(data / "speech") if audio else []
    if audio and not clips:
        raise typer.BadParameter(f"no WAVs under {data / 'speech'}")
    console.print(
        f"{wearables} wearables ({audio} streaming audio, {wearables - audio} sending "
        "transcripts), "
        f"{clients} retrieval clients, {minutes:g} min, then {quiet_minutes:g} min quiet; "
        f"{len(turns)} LoCoMo turns, "
        f"{len(questions)} questions" + (f", {len(clips)} WAVs" if clips else "")
    )
    with workdir("her-os-load-", keep) as tmp, contextlib.ExitStack() as stack:
        root = Path(tmp)
        transcripts, events = root / "transcripts", root / "events"
        transcripts.mkdir()
        events.mkdir()
        pg = stack.enter_context(postgres(database_url, root))
        env = {"CONTEXT_ENGINE_SESSION_GAP_S": str(session_gap_s)}
        if graph:
            env["CONTEXT_ENGINE_GRAPH_URL"] = stack.enter_context(falkordb(root))
        else:
            env["CONTEXT_ENGINE_CONTEXT_LEGS"] = '["bm25","vector"]'
        engine = EngineProcess(pg.url, transcripts, events, root / "engine.log", extra_env=env)
        stack.enter_context(engine)
        audio_log = root / "audio-pipeline.log"
        proc, audio_url = start_audio_pipeline(root, transcripts, events, audio_log)
        stack.callback(stop_process, proc)
        shown = {
            k: "redis://… (FalkorDB)" if k.endswith("GRAPH_URL") else v for k, v in env.items()
        }
        console.print(f"engine settings: defaults but {shown}")
        pgdata = pg.log_path.parent if pg.embedded and pg.log_path else None
        groups = process_groups(engine, proc, pgdata)
        load, run_s, cpu = asyncio.run(
            drive(
                engine, audio_url, groups, minutes=minutes, wearables=wearables, audio=audio,
                clients=clients, turns=turns, questions=questions, clips=clips, poll_s=poll_s,
                sample_s=sample_s, quiet_minutes=quiet_minutes, seed=seed,
            )
        )  # fmt: skip
        store = asyncio.run(drain(pg.url, load.sent_segments, drain_timeout))
        check = None
        with console.status("GET /v1/check"):
            r = httpx.get(engine.base_url + "/v1/check", headers=engine.headers, timeout=600)
        if r.status_code == 200:
            check = r.json()
        else:
            console.print(f"[red]GET /v1/check: HTTP {r.status_code} {r.text[:200]}[/]")
        verdicts = report(load, run_s, cpu, store, check, asyncio.run(_shared_buffers(pg.url)))
        report_log(engine.log_events(), "engine log")
        report_log(log_events(audio_log), "audio pipeline log")
        version = asyncio.run(_pg_version(pg.url))
    for name, ok in verdicts.items():
        console.print(f"{'[green]PASS' if ok else '[red]FAIL'}[/] {name}")
    print_footer(version)
    if not all(verdicts.values()):
        raise typer.Exit(1)


async def _shared_buffers(url: str) -> float:
    """PostgreSQL's shared_buffers in MiB."""
    engine = make_engine(url, pool_size=1)
    try:
        async with engine.connect() as conn:
            size = await conn.scalar(
                text("SELECT setting::bigint * block_size_setting FROM pg_settings,"
                     " (SELECT setting::bigint AS block_size_setting FROM pg_settings"
                     "  WHERE name = 'block_size') b WHERE name = 'shared_buffers'")
            )  # fmt: skip
        return float(size) / 2**20
    finally:
        await engine.dispose()


async def _pg_version(url: str) -> str:
    engine = make_engine(url, pool_size=1)
    try:
        return await pg_version(engine)
    finally:
        await engine.dispose()


if __name__ == "__main__":
    typer.run(main)
