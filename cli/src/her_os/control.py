"""Acting on a run from outside the supervisor: `her-os down`, and clearing a stale run."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterable

import psutil

from her_os import postgres
from her_os.paths import DataLayout
from her_os.state import Component, SupervisorLock, live_state, read_state, remove_state


def _stop_signal(component: Component) -> signal.Signals:
    # SIGINT is PostgreSQL's fast shutdown; SIGTERM would wait for clients to disconnect.
    return signal.SIGINT if component.name == postgres.NAME else signal.SIGTERM


def terminate_recorded(components: Iterable[Component], timeout: float = 30.0) -> list[str]:
    """Stop recorded processes that are still alive (pid and start time both matching);
    returns their names. Services first, PostgreSQL last, as the supervisor does."""
    ordered = sorted(components, key=lambda c: c.name == postgres.NAME)
    stopped: list[str] = []
    for component in ordered:
        proc = component.process.process()
        if proc is None:
            continue
        try:
            proc.send_signal(_stop_signal(component))
            if not component.process.wait_gone(timeout):
                proc.kill()
        except psutil.NoSuchProcess:
            pass
        stopped.append(component.name)
    return stopped


def clear_stale(layout: DataLayout) -> list[str]:
    """Called with the supervisor lock held: whatever state.json records is from a dead
    supervisor. Its children normally died with it; stop any that did not."""
    state = read_state(layout.state_file)
    stopped = terminate_recorded(state.components.values()) if state else []
    remove_state(layout.state_file)
    return stopped


def down(layout: DataLayout, timeout: float) -> tuple[bool, list[str]]:
    """SIGTERM the supervisor and wait for it. Returns (was_running, names killed because it
    did not finish in time)."""
    state = live_state(layout.state_file)
    if state is None:
        if read_state(layout.state_file) is not None:
            lock = SupervisorLock(layout.lock_file)
            if lock.acquire():  # else an `up` is starting right now and owns the file
                try:
                    clear_stale(layout)
                finally:
                    lock.release()
        return False, []
    proc = state.supervisor.process()
    if proc is None:
        return False, []
    try:
        proc.send_signal(signal.SIGTERM)
    except psutil.NoSuchProcess:
        return True, []
    if state.supervisor.wait_gone(timeout):
        # The supervisor removes the state file on its way out; give it a moment.
        deadline = time.monotonic() + 2.0
        while layout.state_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return True, []
    # The supervisor is stuck: kill it first (so it cannot start anything while we work),
    # then what it recorded.
    try:
        proc.kill()
    except psutil.Error:
        pass
    state.supervisor.wait_gone(5.0)
    killed = terminate_recorded(state.components.values(), timeout=10.0)
    remove_state(layout.state_file)
    return True, killed
