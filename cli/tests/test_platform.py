"""End to end: `her-os up` with a real PostgreSQL, FalkorDB and the three services.

Each run uses free random ports and a temporary data dir, so it works beside a running
platform. Every process `up` ever had as a descendant is recorded while it runs, to prove
none outlives it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import psutil
import pytest
import redis

from her_os import dashboard
from her_os.postgres import binary
from her_os.state import ProcessRef

pytestmark = [pytest.mark.platform, pytest.mark.timeout(240)]

HEALTHY_TIMEOUT_S = 120
COMPONENTS = {"postgres", "falkordb", "audio-pipeline", "context-engine", "annie-voice"}
PORT_ENV = {
    "postgres": "HER_OS_POSTGRES_PORT",
    "falkordb": "HER_OS_FALKORDB_PORT",
    "audio-pipeline": "HER_OS_AUDIO_PORT",
    "context-engine": "HER_OS_CONTEXT_PORT",
    "annie-voice": "HER_OS_ANNIE_PORT",
}
PORT_OPTION = {
    "postgres": "--postgres-port",
    "falkordb": "--falkordb-port",
    "audio-pipeline": "--audio-port",
    "context-engine": "--context-port",
    "annie-voice": "--annie-port",
}


def _free_ports() -> dict[str, int]:
    socks = [socket.socket() for _ in COMPONENTS]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        ports = [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()
    return dict(zip(sorted(COMPONENTS), ports, strict=True))


def _base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HER_OS_")}
    env["COLUMNS"] = "200"
    # The dashboard is served only where a run asks for it (its own port, a fresh build).
    env["HER_OS_DASHBOARD"] = "false"
    return env


@pytest.fixture(scope="module")
def aquarium() -> Path | None:
    """The dashboard project, freshly built, when its npm packages are installed (make test
    installs them first); None otherwise."""
    project = dashboard.default_dir()
    vite = project / "node_modules" / "vite" / "bin" / "vite.js"
    node = shutil.which("node")
    if node is None or not vite.is_file():
        return None
    built = subprocess.run(
        [node, str(vite), "build", str(project), "--logLevel", "warn"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    return project


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "her_os", *args],
        capture_output=True,
        text=True,
        env=env or _base_env(),
        timeout=180,
    )


class Up:
    """A running `her-os up` whose every descendant is recorded by a watcher thread."""

    def __init__(
        self,
        data_dir: Path,
        ports: dict[str, int],
        *,
        via_env: bool,
        extra_args: tuple[str, ...] = (),
        **env: str,
    ) -> None:
        self.data_dir = data_dir
        self.ports = ports
        self.output = data_dir.parent / f"up-{time.monotonic_ns()}.out"
        full_env = _base_env() | env
        args = ["up", "--data-dir", str(data_dir)]
        for name, port in ports.items():
            if via_env:
                full_env[PORT_ENV[name]] = str(port)
            else:
                args += [PORT_OPTION[name], str(port)]
        args += extra_args
        with self.output.open("w") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "her_os", *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=full_env,
                start_new_session=True,
            )
        self.seen: dict[int, ProcessRef] = {}
        self._stop = threading.Event()
        self._watcher = threading.Thread(target=self._watch, daemon=True)
        self._watcher.start()

    def _watch(self) -> None:
        while not self._stop.is_set():
            try:
                for child in psutil.Process(self.proc.pid).children(recursive=True):
                    ref = ProcessRef.of(child.pid)
                    if ref is not None:
                        self.seen.setdefault(child.pid, ref)
            except psutil.Error:
                pass
            time.sleep(0.05)

    def text(self) -> str:
        return self.output.read_text()

    def wait_healthy(self) -> dict:
        deadline = time.monotonic() + HEALTHY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"`her-os up` exited with {self.proc.returncode}:\n{self.text()}")
            result = _cli("status", "--json", "--data-dir", str(self.data_dir))
            report = json.loads(result.stdout)
            if result.returncode == 0:
                assert report["healthy"] is True
                return report
            time.sleep(0.5)
        pytest.fail(f"not healthy after {HEALTHY_TIMEOUT_S} s:\n{self.text()}")

    def printed_token(self, timeout: float = 30) -> str:
        """The token line `up` prints after the endpoints table. `status` can already report
        healthy a moment before that table is written, so wait for the line."""
        deadline = time.monotonic() + timeout
        while (match := TOKEN_LINE.search(self.text())) is None:
            if time.monotonic() > deadline:
                pytest.fail(f"no token line after {timeout} s:\n{self.text()}")
            time.sleep(0.1)
        return match.group(1)

    def wait_exit(self, timeout: float = 120) -> int:
        code = self.proc.wait(timeout)
        self._stop.set()
        self._watcher.join()
        return code

    def survivors(self, grace_s: float = 10.0) -> list[str]:
        """Descendants still alive, after giving orphans a moment to be reaped."""
        deadline = time.monotonic() + grace_s
        while True:
            alive = [ref for ref in self.seen.values() if ref.alive()]
            if not alive or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        return [f"{ref.pid}: {' '.join(psutil.Process(ref.pid).cmdline())}" for ref in alive]

    def kill_everything(self) -> None:
        """Test cleanup only: whatever happened, leave nothing running."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._stop.set()
        for ref in self.seen.values():
            proc = ref.process()
            if proc is not None:
                proc.kill()


@pytest.fixture
def started(tmp_path):
    runs: list[Up] = []

    def start(
        data_dir: Path,
        ports: dict[str, int],
        *,
        via_env: bool = False,
        extra_args: tuple[str, ...] = (),
        **env: str,
    ) -> Up:
        up = Up(data_dir, ports, via_env=via_env, extra_args=extra_args, **env)
        runs.append(up)
        return up

    yield start
    for up in runs:
        up.kill_everything()


def _psql(port: int, password: str, sql: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["PGPASSWORD"] = password
    return subprocess.run(
        [str(binary("psql")), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
         "-p", str(port), "-U", "heros", "-d", "heros", "-c", sql],
        capture_output=True, text=True, env=env, timeout=30,
    )  # fmt: skip


def _graph(port: int, password: str | None, query: str) -> list:
    conn = redis.Redis(host="127.0.0.1", port=port, password=password, socket_timeout=10)
    try:
        return conn.execute_command("GRAPH.QUERY", "memories", query)
    finally:
        conn.close()


TOKEN_LINE = re.compile(r"Internal token \(header X-Internal-Token\): (\S+)")


def _conversation_becomes_memory(data_dir: Path, ports: dict, token: str, fk_password: str):
    """With no LLM: a conversation written as JSONL becomes entities in PostgreSQL and a
    graph in FalkorDB that graphiti search queries (the fast extractor, graph stage)."""
    from datetime import UTC, datetime

    from her_os_shared.jsonl import append_records
    from her_os_shared.transcript import Segment, TranscriptPayload

    said = [
        ("Asha", "My wife Priya is flying to Paris on Friday."),
        ("Asha", "I love coffee, I have three cups a day."),
    ]
    payload = TranscriptPayload(
        session_id="platform-talk",
        device_id="dev1",
        session_started_at=datetime(2025, 6, 1, 10, 0, tzinfo=UTC),  # long silent: ends now
        segments=[
            Segment(segment_id=f"p{i}", speaker=who, text=text, start=i * 5.0,
                    end=i * 5.0 + 4.0, stt_engine="test")
            for i, (who, text) in enumerate(said)
        ],
    )  # fmt: skip
    append_records(data_dir / "transcripts", "platform-talk", [payload])
    _memory_is_there(ports, token, fk_password)


def _memory_is_there(ports: dict, token: str, fk_password: str) -> None:
    """The conversation of _conversation_becomes_memory is in every store: PostgreSQL's
    entities, the graph, the vectors and the keyword index (waits up to 2 minutes each)."""
    base = f"http://127.0.0.1:{ports['context-engine']}/v1"
    headers = {"X-Internal-Token": token}

    def poll(path: str, params: dict, ready) -> dict:
        deadline = time.monotonic() + 120
        while True:
            body = httpx.get(base + path, params=params, headers=headers, timeout=10).json()
            if ready(body) or time.monotonic() > deadline:
                return body
            time.sleep(0.5)

    people = poll("/entities", {"type": "person"}, lambda b: len(b.get("entities", [])) >= 2)
    assert {"Asha", "Priya"} <= {e["name"] for e in people["entities"]}, people
    found = poll("/graph/search", {"query": "Priya"}, lambda b: bool(b.get("facts")))
    assert any(f["object"] == "Priya" for f in found["facts"]), found
    # Hybrid retrieval is the default: a query sharing no word with "I love coffee" finds it
    # through the vector leg, every leg answering.
    hybrid = poll(
        "/context",
        {"query": "favourite hot drink", "limit": 1},
        lambda b: bool(b.get("results")) and b["results"][0]["segment_id"] == "p1",
    )
    assert hybrid["legs"] == {"bm25": "ok", "vector": "ok", "graph": "ok"}, hybrid
    assert hybrid["results"][0]["segment_id"] == "p1", hybrid
    # The graph is FalkorDB's own: graph "her-os" (the group id) holds the nodes.
    client = redis.Redis(port=ports["falkordb"], password=fk_password)
    try:
        rows = client.execute_command(
            "GRAPH.QUERY", "her-os", "MATCH (n:Entity) RETURN n.name ORDER BY n.name"
        )[1]
    finally:
        client.close()
    assert {b"Asha", b"Priya"} <= {r[0] for r in rows}


def test_up_stop_restart_down(tmp_path, started, aquarium):
    data_dir = tmp_path / "data"
    ports = _free_ports()

    # First run: ports from HER_OS_* environment variables; Ctrl-C (SIGINT) stops it.
    first = started(data_dir, ports, via_env=True)
    report = first.wait_healthy()
    assert set(report["components"]) == COMPONENTS
    assert "turned off" in report["skipped"]["dashboard"]  # HER_OS_DASHBOARD=false
    for name, comp in report["components"].items():
        assert comp["alive"] and comp["healthy"] and comp["port"] == ports[name], comp

    secrets_dir = data_dir / "secrets"
    token = (secrets_dir / "internal_token").read_text().strip()
    pg_password = (secrets_dir / "postgres_password").read_text().strip()
    fk_password = (secrets_dir / "falkordb_password").read_text().strip()
    assert oct(secrets_dir.stat().st_mode & 0o777) == "0o700"
    assert first.printed_token() == token

    # Real SQL with the generated password; a wrong password is refused.
    created = _psql(
        ports["postgres"],
        pg_password,
        "CREATE TABLE memo (id int PRIMARY KEY, body text); "
        "INSERT INTO memo VALUES (1, 'remember the milk'); SELECT body FROM memo",
    )
    assert created.returncode == 0, created.stderr
    assert created.stdout.strip() == "remember the milk"
    refused = _psql(ports["postgres"], "wrong-password", "SELECT 1")
    assert refused.returncode != 0
    assert "password authentication failed" in refused.stderr

    # FalkorDB: the graph module answers, and only with the password.
    result = _graph(ports["falkordb"], fk_password, "CREATE (:Memory {text: 'milk'})")
    assert b"Nodes created: 1" in result[-1]
    with pytest.raises(redis.AuthenticationError):
        _graph(ports["falkordb"], None, "RETURN 1")

    for name in ("audio-pipeline", "context-engine", "annie-voice"):
        response = httpx.get(f"http://127.0.0.1:{ports[name]}/health", timeout=5)
        assert response.status_code == 200
        assert response.json() == {"status": "ok"}

    _conversation_becomes_memory(data_dir, ports, token, fk_password)

    # A second `up` on the same data dir does not start anything.
    again = _cli("up", "--data-dir", str(data_dir))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "already running" in again.stdout

    first.proc.send_signal(signal.SIGINT)
    assert first.wait_exit() == 0, first.text()
    assert len(first.seen) >= 5
    assert first.survivors() == []
    assert not (data_dir / "run" / "state.json").exists()
    assert _cli("status", "--json", "--data-dir", str(data_dir)).returncode == 1

    # Second run on the same data: ports from options this time; nothing re-generated. The
    # Aquarium is served too (when its packages are installed), proxying /v1 to the engine.
    pg_version_mtime = (data_dir / "postgres" / "PG_VERSION").stat().st_mtime_ns
    dashboard_port = next(p for p in _free_ports().values() if p not in ports.values())
    dashboard_args = ("--dashboard", "--dashboard-port", str(dashboard_port))
    project = str(aquarium or tmp_path / "no-dashboard")
    second = started(data_dir, ports, extra_args=dashboard_args, HER_OS_DASHBOARD_DIR=project)
    report = second.wait_healthy()
    if aquarium is None:
        assert "no dashboard project" in report["skipped"]["dashboard"]
    else:
        assert report["components"]["dashboard"]["healthy"], report
        page = httpx.get(f"http://127.0.0.1:{dashboard_port}/", timeout=10)
        assert page.status_code == 200 and "her-os Aquarium" in page.text
        proxied = httpx.get(
            f"http://127.0.0.1:{dashboard_port}/v1/tiers/stats",
            headers={"X-Internal-Token": token},
            timeout=10,
        )
        assert proxied.status_code == 200, proxied.text
        assert set(proxied.json()["tiers"]) == {"L0", "L1", "L2"}
    assert second.printed_token() == token
    assert (secrets_dir / "internal_token").read_text().strip() == token
    assert "cluster created" not in second.text()
    assert (data_dir / "postgres" / "PG_VERSION").stat().st_mtime_ns == pg_version_mtime
    kept = _psql(ports["postgres"], pg_password, "SELECT body FROM memo WHERE id = 1")
    assert kept.returncode == 0, kept.stderr
    assert kept.stdout.strip() == "remember the milk"
    result = _graph(ports["falkordb"], fk_password, "MATCH (m:Memory) RETURN m.text")
    assert result[1] == [[b"milk"]]

    stopped = _cli("down", "--data-dir", str(data_dir))
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert second.wait_exit(timeout=30) == 0, second.text()
    assert second.survivors() == []
    assert "not running" in _cli("down", "--data-dir", str(data_dir)).stdout


def test_failed_start_stops_what_was_started(tmp_path, started):
    # An invalid setting that only the context engine reads makes it exit at startup,
    # after PostgreSQL, FalkorDB and the other services are up.
    up = started(tmp_path / "data", _free_ports(), CONTEXT_ENGINE_LOG_LEVEL="bogus")
    assert up.wait_exit() == 1
    text = up.text()
    assert "context-engine" in text and "exited with code" in text
    assert "log_level" in text  # the tail of its log explains why
    assert {"postgres", "falkordb"} <= {
        line.split()[1] for line in text.splitlines() if line.startswith("✓") and "stopped" in line
    }
    assert up.survivors() == []
    assert not (tmp_path / "data" / "run" / "state.json").exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux")
def test_killed_supervisor_leaves_no_orphans(tmp_path, started):
    data_dir = tmp_path / "data"
    up = started(data_dir, _free_ports())
    up.wait_healthy()
    up.proc.kill()  # SIGKILL: no cleanup code runs in the supervisor
    up.wait_exit()
    assert up.survivors(grace_s=60) == []
    # The state file it left behind is recognised as stale.
    status = json.loads(_cli("status", "--json", "--data-dir", str(data_dir)).stdout)
    assert status["running"] is False
    assert "not running" in _cli("down", "--data-dir", str(data_dir)).stdout
    assert not (data_dir / "run" / "state.json").exists()


def test_backup_restore_and_rebuild_round_trip(tmp_path, started):
    """`her-os backup` of a platform with a memory, `restore` into a new data directory (the
    memory is all there at once), then `rebuild` from the JSONL alone (re-derived)."""
    data_dir, moved_dir = tmp_path / "data", tmp_path / "moved"
    ports = _free_ports()
    first = started(data_dir, ports)
    first.wait_healthy()
    secrets = data_dir / "secrets"
    token = (secrets / "internal_token").read_text().strip()
    fk_password = (secrets / "falkordb_password").read_text().strip()
    _conversation_becomes_memory(data_dir, ports, token, fk_password)

    live_archive = tmp_path / "live.tar.gz"
    made = _cli("backup", "--data-dir", str(data_dir), "--output", str(live_archive))
    assert made.returncode == 0, made.stdout + made.stderr
    assert "taken live" in made.stdout
    refused = _cli("restore", str(live_archive), "--data-dir", str(data_dir))
    assert refused.returncode == 1 and "her-os down" in refused.stderr
    assert _cli("down", "--data-dir", str(data_dir)).returncode == 0
    assert first.wait_exit(timeout=60) == 0, first.text()

    archive = tmp_path / "memory.tar.gz"
    made = _cli("backup", "--data-dir", str(data_dir), "--output", str(archive))
    assert made.returncode == 0, made.stdout + made.stderr
    restored = _cli("restore", str(archive), "--data-dir", str(moved_dir))
    assert restored.returncode == 0, restored.stdout + restored.stderr

    # The restored platform answers from restored stores: nothing to ingest or extract again.
    second = started(moved_dir, ports)
    second.wait_healthy()
    assert (moved_dir / "secrets" / "internal_token").read_text().strip() == token
    headers = {"X-Internal-Token": token}
    base = f"http://127.0.0.1:{ports['context-engine']}/v1"
    stats = httpx.get(base + "/stats", headers=headers, timeout=10).json()
    assert stats["segments"]["active"] == 2 and stats["entities"] >= 2, stats
    assert stats["vectors"]["embedded"] == 2, stats
    _memory_is_there(ports, token, fk_password)
    assert _cli("down", "--data-dir", str(moved_dir)).returncode == 0
    assert second.wait_exit(timeout=60) == 0, second.text()

    # Rebuild: PostgreSQL, FalkorDB, the vectors and the keyword index from the JSONL alone.
    rebuilt = _cli("rebuild", "--yes", "--data-dir", str(moved_dir))
    assert rebuilt.returncode == 0, rebuilt.stdout + rebuilt.stderr
    assert not (moved_dir / "postgres").exists() and not (moved_dir / "falkordb").exists()
    third = started(moved_dir, ports)
    third.wait_healthy()
    assert "cluster created" in third.text()
    _memory_is_there(ports, token, fk_password)
    assert _cli("down", "--data-dir", str(moved_dir)).returncode == 0
    assert third.wait_exit(timeout=60) == 0, third.text()

    # The live backup: PostgreSQL and FalkorDB as they were, the vectors embedded again.
    live_dir = tmp_path / "live"
    restored = _cli("restore", str(live_archive), "--data-dir", str(live_dir))
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert not (live_dir / "vectors").exists()
    fourth = started(live_dir, ports)
    fourth.wait_healthy()
    assert "cluster created" not in fourth.text()
    stats = httpx.get(base + "/stats", headers=headers, timeout=10).json()
    assert stats["segments"]["active"] == 2 and stats["entities"] >= 2, stats
    _memory_is_there(ports, token, fk_password)
    assert _cli("down", "--data-dir", str(live_dir)).returncode == 0
    assert fourth.wait_exit(timeout=60) == 0, fourth.text()
