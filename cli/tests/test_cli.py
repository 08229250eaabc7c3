"""The commands, in-process, without starting the platform."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from her_os.main import app
from her_os.paths import DataLayout
from her_os.state import Component, ProcessRef, RunState, SupervisorLock, write_state

runner = CliRunner()


@pytest.fixture
def layout(tmp_path, monkeypatch) -> DataLayout:
    for name in list(os.environ):
        if name.startswith("HER_OS_"):
            monkeypatch.delenv(name)
    layout = DataLayout(tmp_path / "data")
    layout.create()
    return layout


def _dead_ref() -> ProcessRef:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    ref = ProcessRef.of(child.pid) or ProcessRef(child.pid, 0.0)
    child.wait()
    return ref


def _state(supervisor: ProcessRef, layout: DataLayout) -> RunState:
    return RunState(
        supervisor=supervisor,
        started_at="2026-01-01T00:00:00+00:00",
        data_dir=str(layout.root),
        host="127.0.0.1",
        connect_host="127.0.0.1",
        phase="running",
        components={"postgres": Component("postgres", _dead_ref(), 55432)},
    )


def test_status_json_when_not_running(layout):
    result = runner.invoke(app, ["status", "--json", "--data-dir", str(layout.root)])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["running"] is False and report["healthy"] is False
    assert set(report["components"]) == {
        "postgres",
        "falkordb",
        "audio-pipeline",
        "context-engine",
        "annie-voice",
        "dashboard",
    }
    assert all(not c["alive"] for c in report["components"].values())


def test_down_when_not_running(layout):
    result = runner.invoke(app, ["down", "--data-dir", str(layout.root)])
    assert result.exit_code == 0
    assert "not running" in result.stdout


def test_down_clears_a_stale_state_file(layout):
    write_state(layout.state_file, _state(_dead_ref(), layout))
    result = runner.invoke(app, ["down", "--data-dir", str(layout.root)])
    assert result.exit_code == 0
    assert "not running" in result.stdout
    assert not layout.state_file.exists()


def test_up_refuses_a_busy_port_before_starting_anything(layout):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = runner.invoke(
            app, ["up", "--data-dir", str(layout.root), "--falkordb-port", str(port)]
        )
    assert result.exit_code == 1
    message = " ".join(result.stderr.split())  # rich wraps long lines
    assert f"port {port}" in message
    assert "--falkordb-port" in message and "HER_OS_FALKORDB_PORT" in message
    assert not (layout.postgres / "PG_VERSION").exists()
    assert not layout.state_file.exists()


def test_up_when_already_running_says_so(layout):
    lock = SupervisorLock(layout.lock_file)
    assert lock.acquire()  # stands in for a live supervisor
    try:
        me = ProcessRef.of(os.getpid())
        assert me is not None
        write_state(layout.state_file, _state(me, layout))
        result = runner.invoke(app, ["up", "--data-dir", str(layout.root)])
    finally:
        lock.release()
    assert result.exit_code == 0
    assert "already running" in result.stdout
    assert "postgresql://heros@127.0.0.1:55432/heros" in result.stdout


def test_invalid_setting_is_a_usage_error(layout, monkeypatch):
    monkeypatch.setenv("HER_OS_AUDIO_PORT", "not-a-port")
    result = runner.invoke(app, ["status", "--data-dir", str(layout.root)])
    assert result.exit_code == 2
    assert "HER_OS_AUDIO_PORT" in result.stderr


def test_logs(layout):
    layout.log_file("postgres").write_text("a\nb\nc\n")
    layout.log_file("falkordb").write_text("x\n")
    one = runner.invoke(app, ["logs", "postgres", "-n", "2", "--data-dir", str(layout.root)])
    assert one.exit_code == 0
    assert one.stdout == "b\nc\n"
    every = runner.invoke(app, ["logs", "--data-dir", str(layout.root)])
    assert every.exit_code == 0
    assert "falkordb.log <==\nx\n" in every.stdout and "postgres.log <==\na\nb\nc\n" in every.stdout
    missing = runner.invoke(app, ["logs", "nope", "--data-dir", str(layout.root)])
    assert missing.exit_code == 1
    assert "postgres" in missing.stderr
