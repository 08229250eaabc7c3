"""The test suite holds its resources (tests/run_resources.py, tests/reaper.py): a run of its
own in a temporary root, the memory and leftover figures printed, and nothing left behind
when the run is killed outright: the servers it started (one daemonised the way pg_ctl
daemonises PostgreSQL, outside pytest's process tree) and its temporary root."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from reaper import RUN_ENV, alive

ROOT = Path(__file__).resolve().parents[1]
WAIT_S = 60.0

# A test run of its own: it starts a child process and a daemonised one (detached into a
# session of its own, reparented to init, as `pg_ctl start` leaves the postmaster), writes
# where things are, then waits (for the kill) or ends.
CHILD_TEST = """
import json, os, subprocess, sys, tempfile, time
from pathlib import Path

def test_starts_servers(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    daemon = subprocess.run(
        ["sh", "-c", "setsid sleep 600 >/dev/null 2>&1 & echo $!"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    Path(os.environ["INFO_FILE"]).write_text(json.dumps({
        "pids": [child.pid, int(daemon)],
        "root": tempfile.gettempdir(),
        "tmp_path": str(tmp_path),
    }))
    if os.environ.get("WAIT") == "1":
        time.sleep(600)
    child.kill()
    child.wait()
    subprocess.run(["kill", daemon], check=True)
"""


def _until(what: str, check, timeout: float = WAIT_S) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _child_run(tmp_path: Path, wait: bool) -> tuple[subprocess.Popen[str], Path]:
    folder = tmp_path / ("killed" if wait else "ends")
    folder.mkdir()
    (folder / "test_child.py").write_text(CHILD_TEST)
    info = folder / "info.json"
    env = {
        **os.environ,
        "INFO_FILE": str(info),
        "WAIT": "1" if wait else "0",
        "PYTHONPATH": str(ROOT / "tests"),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "run_resources", "-p", "no:cacheprovider",
         "-q", "--rootdir", str(folder), "-c", os.devnull, str(folder / "test_child.py")],
        cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    return proc, info


pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
    pytest.mark.timeout(300),
]


def test_this_run_has_a_temporary_root_and_a_run_id_of_its_own(tmp_path: Path) -> None:
    root = Path(os.environ["TMPDIR"])
    assert root.name.startswith(f"her-os-test-{os.environ[RUN_ENV]}-")
    assert tmp_path.is_relative_to(root)  # pytest's basetemp is inside it
    assert not str(tmp_path).startswith("/tmp/pytest-of-")


def test_a_run_that_ends_prints_its_figures_and_removes_its_root(tmp_path: Path) -> None:
    proc, info = _child_run(tmp_path, wait=False)
    out, _ = proc.communicate(timeout=WAIT_S * 2)
    assert proc.returncode == 0, out
    found = json.loads(info.read_text())
    root = Path(found["root"])
    assert root != Path(os.environ["TMPDIR"])  # not this run's root: one each
    assert Path(found["tmp_path"]).is_relative_to(root)
    assert "peak resident memory:" in out and "GiB RSS summed" in out, out
    assert "processes of the run left after the last test: 0" in out, out
    _until("the finished run's root to be removed", lambda: not root.exists())


def test_a_killed_run_leaves_no_process_and_no_temporary_root(tmp_path: Path) -> None:
    proc, info = _child_run(tmp_path, wait=True)
    try:
        _until("the child run's servers", info.exists)
        found = json.loads(info.read_text())
        pids, root = found["pids"], Path(found["root"])
        assert all(alive(p) for p in pids) and root.is_dir()
    finally:
        proc.send_signal(signal.SIGKILL)  # no teardown, no atexit: only the reaper is left
        proc.communicate(timeout=WAIT_S)
    _until("the killed run's processes to be stopped", lambda: not any(map(alive, pids)))
    _until("the killed run's root to be removed", lambda: not root.exists())
