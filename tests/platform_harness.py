"""The embedded platform as real processes, for cross-service tests: the context engine, the
audio pipeline and Annie (talking to that engine), each `python -m <package>` on a free port
with its own token, every data folder under one directory, the engine on a fresh database of
the test run's PostgreSQL (`postgres_server`), dropped afterwards."""

from __future__ import annotations

import asyncio
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import httpx
import pg_harness
import pytest
from engine_harness import free_port
from service_process import spawn, stop, tail

START_S = 240.0


@dataclass
class Service:
    name: str
    url: str
    log: Path
    proc: subprocess.Popen[bytes]

    def text(self) -> str:
        return self.log.read_text(errors="replace")


def until(what: str, check: Callable[[], bool], deadline_s: float, log: Path) -> None:
    """Poll `check` every 0.1 s until it holds; fail with the log's tail after `deadline_s`."""
    deadline = time.monotonic() + deadline_s
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}:\n{tail(log)}")
        time.sleep(0.1)


def healthy(service: Service) -> bool:
    assert service.proc.poll() is None, f"{service.name} exited:\n{tail(service.log)}"
    try:
        return httpx.get(service.url + "/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def admin(postgres_server: tuple[str, str], sql: str) -> None:
    """pg_harness.admin, from this module-scoped (synchronous) fixture."""
    asyncio.run(pg_harness.admin(postgres_server, sql))


@contextmanager
def platform(
    postgres_server: tuple[str, str],
    root: Path,
    tokens: dict[str, str],
    *,
    common: dict[str, str] | None = None,
    extra: dict[str, dict[str, str]] | None = None,
) -> Iterator[dict[str, Service]]:
    """The three services started together ("engine", "audio", "annie"), waited for until
    each `/health` answers. `tokens` holds each one's internal token by those names;
    `common` settings go to all three (without their prefix), `extra[name]` to one."""
    socket_dir, user = postgres_server
    database = f"platform_{uuid.uuid4().hex[:10]}"
    admin(postgres_server, f'CREATE DATABASE "{database}"')
    ports = {name: free_port() for name in ("engine", "audio", "annie")}
    url = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
    settings = {
        "engine": ("context_engine", "CONTEXT_ENGINE_", {
            "INTERNAL_TOKEN": tokens["engine"],
            "DATABASE_URL": f"postgresql+asyncpg://{user}@/{database}?host={quote(socket_dir)}",
            "TRANSCRIPTS_DIR": str(root / "transcripts"),
            "EVENTS_DIR": str(root / "engine-events"),
            "SEARCH_INDEX_DIR": str(root / "search-index"),
            "VECTOR_DIR": str(root / "vectors"),
            "VECTOR_INDEX_ENABLED": "false",
        }),
        "audio": ("audio_pipeline", "AUDIO_PIPELINE_", {
            "INTERNAL_TOKEN": tokens["audio"],
            "TRANSCRIPTS_DIR": str(root / "transcripts"),
            "EVENTS_DIR": str(root / "audio-events"),
            "SPOOL_DIR": str(root / "spool"),
            "ENROLLMENT_DIR": str(root / "enrollment"),
            "MODELS_DIR": str(root / "models"),
        }),
        "annie": ("annie_voice", "ANNIE_VOICE_", {
            "INTERNAL_TOKEN": tokens["annie"],
            "CONTEXT_ENGINE_URL": url["engine"],
            "CONTEXT_ENGINE_TOKEN": tokens["engine"],
            "MODELS_DIR": str(root / "models"),
            "PYTHON_SCRATCH_ROOT": str(root / "scratch"),
        }),
    }  # fmt: skip
    started: dict[str, Service] = {}
    try:
        for name, (package, prefix, own) in settings.items():
            log = root / f"{name}.log"
            env = {**(common or {}), **own, **(extra or {}).get(name, {})}
            proc = spawn(package, prefix, ports[name], env, log)
            started[name] = Service(name, url[name], log, proc)
        for service in started.values():
            until(f"{service.name} to answer", lambda s=service: healthy(s), START_S, service.log)
        yield started
    finally:
        for service in started.values():
            stop(service.proc)
        admin(postgres_server, f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
