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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is gone for our purposes
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _run_processes(marker: bytes) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0") and _alive(int(entry.name)):
                out.append(int(entry.name))
        except OSError:
            continue
    return out


def _signal_all(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def main(pid: int, run_id: str, root: Path) -> None:
    while _alive(pid):
        time.sleep(_POLL_S)
    marker = f"HER_OS_TEST_RUN={run_id}".encode()
    left = _run_processes(marker)
    if left:
        _signal_all(left, signal.SIGTERM)
        deadline = time.monotonic() + _GRACE_S
        while (left := _run_processes(marker)) and time.monotonic() < deadline:
            time.sleep(0.2)
        _signal_all(left, signal.SIGKILL)
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], Path(sys.argv[3]))
