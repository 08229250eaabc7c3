"""Health probes of every component, and the wait-until-healthy loop of `up`."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx


@dataclass(frozen=True)
class Probe:
    healthy: bool
    detail: str


class StartupError(RuntimeError):
    """A component did not come up; `log_tail` is what its log said last."""

    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__(message)
        self.log_tail = log_tail


class StopRequested(Exception):
    """SIGINT/SIGTERM arrived while starting."""


def http_health(url: str, timeout: float = 2.0) -> Probe:
    """GET a service's /health: healthy on 200 {"status": "ok"}, and on 200 {"status":
    "degraded"} (serving without some layers, which the detail names)."""
    try:
        response = httpx.get(url, timeout=timeout)
    except httpx.HTTPError as exc:
        return Probe(False, f"unreachable ({type(exc).__name__})")
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.status_code == 200 and isinstance(body, dict) and body.get("status") == "ok":
        return Probe(True, "ok")
    if response.status_code == 200 and isinstance(body, dict) and body.get("status") == "degraded":
        layers = body.get("degraded")
        names = ", ".join(str(x) for x in layers) if isinstance(layers, list) else "?"
        return Probe(True, f"degraded: {names}")
    return Probe(False, f"HTTP {response.status_code}")


def tcp_open(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_until(
    what: str,
    probe: Callable[[], Probe],
    *,
    timeout: float,
    stop: threading.Event,
    exited: Callable[[], int | None],
    interval: float = 0.25,
) -> None:
    """Poll `probe` until healthy. Raises StopRequested on a stop signal, StartupError when
    the process exits (`exited` returns its code) or `timeout` passes."""
    deadline = time.monotonic() + timeout
    last = Probe(False, "not probed yet")
    while True:
        if stop.is_set():
            raise StopRequested
        code = exited()
        if code is not None:
            raise StartupError(f"{what} exited with code {code} while starting")
        last = probe()
        if last.healthy:
            return
        if time.monotonic() >= deadline:
            raise StartupError(
                f"{what} was not healthy after {timeout:.0f} s (last check: {last.detail})"
            )
        stop.wait(interval)
