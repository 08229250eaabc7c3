"""Cleans up after a test run, however it ended: `python reaper.py PID RUN_ID ROOT`.

Started by tests/run_resources.py in a session of its own. It waits until process PID (the
pytest run) is gone, then sends SIGTERM, and after a grace period SIGKILL, to every process
whose environment carries HER_OS_TEST_RUN=RUN_ID (the embedded PostgreSQL, FalkorDB, the
services the run started, whatever they started), and deletes ROOT, the run's temporary
folder. Standard library only: it must work whatever state the run's virtualenv is in.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
from pathlib import Path

_POLL_S = 0.5
_GRACE_S = 10.0


RUN_ENV = "HER_OS_TEST_RUN"


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie is gone for our purposes)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def run_processes(run_id: str, exclude: frozenset[int] | set[int] = frozenset()) -> list[int]:
    """PIDs of the live processes whose environment carries this run's id (this one and
    `exclude` left out)."""
    marker = f"{RUN_ENV}={run_id}".encode()
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in exclude or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue  # gone, or not ours to read
        if marker in environ.split(b"\0") and alive(int(entry.name)):
            out.append(int(entry.name))
    return out


def _signal_all(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def main(pid: int, run_id: str, root: Path) -> None:
    while alive(pid):
        time.sleep(_POLL_S)
    left = run_processes(run_id)
    if left:
        _signal_all(left, signal.SIGTERM)
        deadline = time.monotonic() + _GRACE_S
        while (left := run_processes(run_id)) and time.monotonic() < deadline:
            time.sleep(0.2)
        _signal_all(left, signal.SIGKILL)
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], Path(sys.argv[3]))
