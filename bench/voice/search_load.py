"""Background readers for the voice benchmark: `--clients` threads each sending fused
`GET /v1/context` requests one after another (a few questions about the conversation and
some that match nothing, round and round) until stopped (SIGTERM or SIGINT), then the count,
rate, errors and latency percentiles as JSON to `--out`. Run as its own process beside
Annie, so its threads do not take her event loop's GIL.

    python bench/voice/search_load.py --url http://127.0.0.1:8100 --token T --out load.json
"""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path
from typing import Annotated

import httpx
import typer

QUERIES = (
    "where is Priya moving",
    "what did Arjun say about her job",
    "when is the dinner",
    "does Priya work remotely",
    "what did the manager agree to",
    "pottery class on Sunday",
    "plans for March",
    "what did I promise to bring",
)


def percentile(values: list[float], p: float) -> float:
    """Nearest rank (as voice_latency.py's)."""
    ordered = sorted(values)
    return ordered[int(max(1, -(-len(ordered) * p // 100))) - 1] if ordered else float("nan")


def main(
    url: Annotated[str, typer.Option(help="the context engine")],
    token: Annotated[str, typer.Option(help="its internal token", envvar="LOAD_TOKEN")],
    out: Annotated[Path, typer.Option(help="where the summary (JSON) goes")],
    clients: Annotated[int, typer.Option(min=1, help="concurrent searching clients")] = 8,
) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    lock = threading.Lock()
    ms: list[float] = []
    statuses: dict[str, int] = {}

    def client(first: int) -> None:
        headers = {"X-Internal-Token": token}
        with httpx.Client(base_url=url, headers=headers, timeout=30) as http:
            i = first
            while not stop.is_set():
                t = time.perf_counter()
                try:
                    r = http.get("/v1/context", params={"query": QUERIES[i % len(QUERIES)]})
                    status = str(r.status_code)
                except httpx.HTTPError as exc:
                    status = type(exc).__name__
                with lock:
                    ms.append((time.perf_counter() - t) * 1000)
                    statuses[status] = statuses.get(status, 0) + 1
                i += 1

    threads = [threading.Thread(target=client, args=(n,), daemon=True) for n in range(clients)]
    started = time.perf_counter()
    for th in threads:
        th.start()
    while not stop.wait(0.5):
        pass
    for th in threads:
        th.join(timeout=35)
    wall = time.perf_counter() - started
    with lock:
        summary = {
            "clients": clients,
            "requests": len(ms),
            "seconds": round(wall, 1),
            "per_s": round(len(ms) / wall, 1) if wall else 0.0,
            "statuses": statuses,
            "p50_ms": round(percentile(ms, 50), 1),
            "p95_ms": round(percentile(ms, 95), 1),
        }
    out.write_text(json.dumps(summary))


if __name__ == "__main__":
    typer.run(main)
