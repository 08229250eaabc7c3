"""Child processes of the supervisor: how they are started, identified and stopped."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from her_os.logs import START_MARKER
from her_os.state import ProcessRef

_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class RunAs:
    """An unprivileged account to run a child as (PostgreSQL refuses to run as root)."""

    name: str
    uid: int
    gid: int


def _die_with_parent(sig: signal.Signals) -> Callable[[], None] | None:
    """A preexec hook making the kernel send `sig` to the child when the supervisor dies,
    even by SIGKILL, so no child outlives it. It runs after the uid switch of `user=`
    (which would clear the setting). Linux only; elsewhere orderly shutdown must do."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)  # loaded before fork, not in the child
    parent = os.getpid()

    def hook() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:  # the supervisor died before the hook ran
            os.kill(os.getpid(), sig)

    return hook


def run_as_kwargs(run_as: RunAs | None) -> dict[str, object]:
    """subprocess arguments dropping to `run_as`, with no supplementary groups of root."""
    if run_as is None:
        return {}
    return {"user": run_as.uid, "group": run_as.gid, "extra_groups": []}


class ManagedProcess:
    """One long-running child: its own session (the terminal's Ctrl-C reaches only the
    supervisor, which then stops children in order), output appended to its log file."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        *,
        stop_signal: signal.Signals = signal.SIGTERM,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        run_as: RunAs | None = None,
    ) -> None:
        self.name = name
        self.log_path = log_path
        self.stop_signal = stop_signal
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        with log_path.open("ab") as log:
            log.write(f"{START_MARKER}{name} at {stamp} ---\n".encode())
            log.flush()
            self.popen = subprocess.Popen(  # noqa: S603 - argv is built by us, no shell
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                start_new_session=True,
                preexec_fn=_die_with_parent(stop_signal),
                **run_as_kwargs(run_as),  # type: ignore[arg-type]
            )
        self.ref = ProcessRef.of(self.popen.pid) or ProcessRef(self.popen.pid, time.time())

    @property
    def pid(self) -> int:
        return self.popen.pid

    def exit_code(self) -> int | None:
        """None while running; reaps the child once it has exited."""
        return self.popen.poll()

    def signal(self, sig: signal.Signals) -> None:
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.popen.send_signal(sig)

    def wait(self, timeout: float) -> bool:
        """True when the child exited within `timeout` seconds."""
        try:
            self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return True


def stop_together(
    procs: Sequence[ManagedProcess],
    timeout: float,
    escalate: Sequence[signal.Signals] = (),
    on_escalate: Callable[[ManagedProcess, signal.Signals], None] | None = None,
) -> None:
    """Send each its stop signal at once, wait up to `timeout` for all; then each signal of
    `escalate` in turn (5 s apart), and finally SIGKILL, to those still running."""
    running = [p for p in procs if p.exit_code() is None]
    for proc in running:
        proc.signal(proc.stop_signal)
    deadline = time.monotonic() + timeout
    for sig in (*escalate, signal.SIGKILL):
        for proc in running:
            proc.wait(max(0.0, deadline - time.monotonic()))
        running = [p for p in running if p.exit_code() is None]
        if not running:
            return
        for proc in running:
            if on_escalate is not None:
                on_escalate(proc, sig)
            proc.signal(sig)
        deadline = time.monotonic() + 5.0
    for proc in running:
        proc.wait(5.0)
