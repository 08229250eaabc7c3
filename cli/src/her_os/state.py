"""The run state (data/run/state.json) and the supervisor lock.

The lock (an flock on data/run/supervisor.lock) decides who runs: the kernel drops it when the
supervisor dies, however it dies, so it can never go stale. state.json only *describes* the
run for `status`, `down` and a second `up`; processes in it are identified by pid and start
time together, so a recycled pid is never mistaken for ours.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

STATE_VERSION = 1


@dataclass(frozen=True)
class ProcessRef:
    pid: int
    create_time: float

    @classmethod
    def of(cls, pid: int) -> ProcessRef | None:
        """The live process `pid`, or None when there is none."""
        try:
            return cls(pid, psutil.Process(pid).create_time())
        except psutil.Error:
            return None

    def process(self) -> psutil.Process | None:
        """The psutil handle if this exact process is still alive (not a zombie)."""
        try:
            proc = psutil.Process(self.pid)
            if abs(proc.create_time() - self.create_time) > 0.01:
                return None  # the pid was recycled
            if proc.status() == psutil.STATUS_ZOMBIE:
                return None
        except psutil.Error:
            return None
        return proc

    def alive(self) -> bool:
        return self.process() is not None

    def wait_gone(self, timeout: float) -> bool:
        """True once the process has exited (within `timeout`). Not psutil's wait(): for a
        process that is not our child that waits for the pid to vanish, and an exited
        process stays a zombie until its own parent reaps it."""
        deadline = time.monotonic() + timeout
        while self.alive():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)
        return True


@dataclass(frozen=True)
class Component:
    """A child process of the supervisor as recorded in state.json."""

    name: str
    process: ProcessRef
    port: int


@dataclass
class RunState:
    supervisor: ProcessRef
    started_at: str
    data_dir: str
    host: str
    connect_host: str
    # "starting" until every component is healthy, then "running".
    phase: str = "starting"
    components: dict[str, Component] = field(default_factory=dict)
    # Optional components `up` did not start, and why (the dashboard when it is not built).
    skipped: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["version"] = STATE_VERSION
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunState:
        return cls(
            supervisor=ProcessRef(**data["supervisor"]),
            started_at=data["started_at"],
            data_dir=data["data_dir"],
            host=data["host"],
            connect_host=data["connect_host"],
            phase=data["phase"],
            components={
                name: Component(
                    name=name, process=ProcessRef(**comp["process"]), port=int(comp["port"])
                )
                for name, comp in data["components"].items()
            },
            skipped={str(k): str(v) for k, v in (data.get("skipped") or {}).items()},
        )


def write_state(path: Path, state: RunState) -> None:
    """Atomic replace: readers never see a half-written file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(state.to_json(), indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_state(path: Path) -> RunState | None:
    """The recorded state, or None when there is none or it is unreadable."""
    try:
        return RunState.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def remove_state(path: Path) -> None:
    path.unlink(missing_ok=True)
    path.with_name(path.name + ".tmp").unlink(missing_ok=True)


def live_state(path: Path) -> RunState | None:
    """The state of a supervisor that is still alive; None when nothing runs."""
    state = read_state(path)
    if state is None or not state.supervisor.alive():
        return None
    return state


class SupervisorLock:
    """Exclusive, non-blocking flock held for the supervisor's whole life."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> bool:
        # os.open descriptors are not inherited by children, so the lock dies with us alone.
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
