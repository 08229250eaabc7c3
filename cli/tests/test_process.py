from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from her_os.process import ManagedProcess, stop_together

IGNORES_TERM = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"


def test_stop_together_stops_and_escalates(tmp_path):
    polite = ManagedProcess("polite", ["sleep", "60"], tmp_path / "polite.log")
    stubborn = ManagedProcess(
        "stubborn", [sys.executable, "-c", IGNORES_TERM], tmp_path / "stubborn.log"
    )
    time.sleep(0.5)  # let the stubborn child install its handler
    escalated: list[tuple[str, str]] = []
    started = time.monotonic()
    stop_together(
        [polite, stubborn], timeout=1.0, on_escalate=lambda p, s: escalated.append((p.name, s.name))
    )
    assert time.monotonic() - started < 10
    assert polite.exit_code() == -signal.SIGTERM
    assert stubborn.exit_code() == -signal.SIGKILL
    assert escalated == [("stubborn", "SIGKILL")]


def test_child_log_gets_a_start_marker_and_output(tmp_path):
    log = tmp_path / "echo.log"
    proc = ManagedProcess("echo", ["echo", "hello"], log)
    assert proc.wait(10)
    text = log.read_text()
    assert "--- her-os: starting echo at " in text
    assert text.rstrip().endswith("hello")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux")
def test_children_die_with_a_killed_supervisor(tmp_path):
    # A stand-in supervisor starts a child, prints its pid and waits; we SIGKILL it, which
    # skips every cleanup path: only the kernel's parent-death signal can stop the child.
    script = textwrap.dedent(
        f"""
        import pathlib, time
        from her_os.process import ManagedProcess
        proc = ManagedProcess("sleeper", ["sleep", "60"], pathlib.Path({str(tmp_path)!r}) / "s.log")
        print(proc.pid, flush=True)
        time.sleep(60)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        child_pid = int(parent.stdout.readline())
        child = psutil.Process(child_pid)
        parent.kill()
        parent.wait()
        child.wait(10)  # raises TimeoutExpired if it outlived its parent
    finally:
        parent.kill()
        parent.wait()
