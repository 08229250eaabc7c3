from __future__ import annotations

import os
import subprocess
import sys

from her_os.state import (
    Component,
    ProcessRef,
    RunState,
    SupervisorLock,
    live_state,
    read_state,
    remove_state,
    write_state,
)


def _state(pid: int | None = None) -> RunState:
    me = ProcessRef.of(pid or os.getpid())
    assert me is not None
    return RunState(
        supervisor=me,
        started_at="2026-01-01T00:00:00+00:00",
        data_dir="/data",
        host="127.0.0.1",
        connect_host="127.0.0.1",
        components={"postgres": Component("postgres", me, 55432)},
    )


def test_round_trip(tmp_path):
    path = tmp_path / "state.json"
    state = _state()
    write_state(path, state)
    assert read_state(path) == state
    assert live_state(path) == state


def test_missing_or_corrupt_state_reads_as_none(tmp_path):
    path = tmp_path / "state.json"
    assert read_state(path) is None
    path.write_text("{not json")
    assert read_state(path) is None
    path.write_text('{"supervisor": {}}')
    assert read_state(path) is None


def test_dead_supervisor_is_not_live(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    ref = ProcessRef.of(child.pid)
    child.wait()
    path = tmp_path / "state.json"
    state = _state()
    state.supervisor = ref or ProcessRef(child.pid, 0.0)
    write_state(path, state)
    assert read_state(path) is not None
    assert live_state(path) is None


def test_recycled_pid_is_not_the_same_process():
    me = ProcessRef.of(os.getpid())
    assert me is not None and me.alive()
    assert not ProcessRef(os.getpid(), me.create_time - 100).alive()


def test_remove_state(tmp_path):
    path = tmp_path / "state.json"
    write_state(path, _state())
    remove_state(path)
    remove_state(path)  # idempotent
    assert not path.exists()


def test_lock_is_exclusive_and_released(tmp_path):
    path = tmp_path / "supervisor.lock"
    first, second = SupervisorLock(path), SupervisorLock(path)
    assert first.acquire()
    assert not second.acquire()
    first.release()
    assert second.acquire()
    second.release()


def test_lock_is_not_inherited_by_children(tmp_path):
    path = tmp_path / "supervisor.lock"
    lock = SupervisorLock(path)
    assert lock.acquire()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        lock.release()
        # Were the descriptor inherited, the sleeping child would still hold the lock.
        other = SupervisorLock(path)
        assert other.acquire()
        other.release()
    finally:
        child.kill()
        child.wait()
