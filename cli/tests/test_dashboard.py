"""Serving the Aquarium from `her-os up`: finding what it needs, the server's command line,
and how a dashboard that `up` did not start shows in the run state and in `status`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from her_os import dashboard
from her_os.config import Settings
from her_os.paths import DataLayout
from her_os.state import ProcessRef, RunState, read_state, write_state
from her_os.status import collect


def _project(tmp_path: Path, *, built: bool, packages: bool) -> Path:
    project = tmp_path / "dashboard"
    project.mkdir(parents=True)
    (project / "package.json").write_text("{}")
    if built:
        (project / "dist").mkdir()
        (project / "dist" / "index.html").write_text(f"<title>{dashboard.TITLE}</title>")
    if packages:
        vite = project / "node_modules" / "vite" / "bin" / "vite.js"
        vite.parent.mkdir(parents=True)
        vite.write_text("")
    return project


def test_the_default_project_is_this_checkouts_dashboard():
    assert (dashboard.default_dir() / "package.json").is_file()
    assert (dashboard.default_dir() / "vite.config.ts").is_file()


def test_locate_says_what_is_missing(tmp_path, monkeypatch):
    with pytest.raises(dashboard.NotServable, match="no dashboard project"):
        dashboard.locate(tmp_path / "nowhere")
    with pytest.raises(dashboard.NotServable, match=r"not built.*make up"):
        dashboard.locate(_project(tmp_path / "a", built=False, packages=True))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(dashboard.NotServable, match=r"Node\.js"):
        dashboard.locate(_project(tmp_path / "b", built=True, packages=True))


def test_locate_needs_the_npm_packages_and_builds_the_command(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    node = bin_dir / "node"
    node.write_text("#!/bin/sh\n")
    node.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    with pytest.raises(dashboard.NotServable, match=r"bootstrap\.sh --node"):
        dashboard.locate(_project(tmp_path / "a", built=True, packages=False))
    project = _project(tmp_path / "b", built=True, packages=True)
    server = dashboard.locate(project)
    assert server.argv("127.0.0.1", 5999) == [
        str(node),
        str(project.resolve() / "node_modules" / "vite" / "bin" / "vite.js"),
        "preview",
        str(project.resolve()),
        "--host",
        "127.0.0.1",
        "--port",
        "5999",
        "--strictPort",
    ]


def test_the_server_is_told_where_the_engine_is():
    env = dashboard.server_env("http://127.0.0.1:8100", base={"PATH": "/bin"})
    assert env == {"PATH": "/bin", "HER_OS_ENGINE_URL": "http://127.0.0.1:8100", "NO_COLOR": "1"}


def test_probe_of_nothing_is_unhealthy():
    assert not dashboard.probe("http://127.0.0.1:9/", timeout=0.5).healthy


def test_a_skipped_dashboard_is_recorded_and_left_out_of_status(tmp_path):
    layout = DataLayout(tmp_path)
    layout.create()
    me = ProcessRef.of(os.getpid())
    assert me is not None
    state = RunState(
        supervisor=me,
        started_at="2026-01-01T00:00:00+00:00",
        data_dir=str(tmp_path),
        host="127.0.0.1",
        connect_host="127.0.0.1",
        phase="running",
        skipped={"dashboard": "the dashboard is not built"},
    )
    write_state(layout.state_file, state)
    assert read_state(layout.state_file) == state
    report = collect(Settings(data_dir=tmp_path))
    assert "dashboard" not in report["components"]
    assert report["skipped"] == {"dashboard": "the dashboard is not built"}
    # A state file written before `skipped` existed still reads.
    data = json.loads(layout.state_file.read_text())
    del data["skipped"]
    layout.state_file.write_text(json.dumps(data))
    assert read_state(layout.state_file) == RunState(**{**state.__dict__, "skipped": {}})
