"""What a test run holds, and that it lets go (a pytest plugin, loaded by the root conftest).

1. Its own temporary root: every run makes `her-os-test-<random>` under the system's temp
   folder and puts pytest's basetemp and Python's `tempfile` there, so two runs on one machine
   never share `/tmp/pytest-of-<user>` (pytest prunes old `pytest-N` folders there, which once
   deleted a live run's database).
2. Every process the run starts carries `HER_OS_TEST_RUN=<run id>` in its environment
   (inherited: the embedded PostgreSQL that pg_ctl daemonises, FalkorDB, the services). A
   reaper (`tests/reaper.py`, its own session) waits for this pytest process to end, however it
   ends (SIGKILL included), then kills whatever still carries the id and deletes the root.
3. Memory: a thread samples the resident memory of pytest and every process of the run twice a
   second; the terminal summary prints the peak (the sum of RSS, and of PSS, which counts
   shared pages such as PostgreSQL's buffers once), the test that was running then, and the
   processes of the run still alive after the last test (each fixture should have stopped its
   own; the reaper stops the rest).

Linux only (/proc); elsewhere the run's root is still its own and the rest is skipped.
"""

from __future__ import annotations

import ctypes
import gc
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from reaper import RUN_ENV, run_processes

_PROC = Path("/proc")
_SAMPLE_S = 0.5
_REAPER = Path(__file__).with_name("reaper.py")


def _kib(pid: int, path: str, field_name: str) -> int:
    try:
        for line in (_PROC / str(pid) / path).read_text().splitlines():
            if line.startswith(field_name):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _name(pid: int) -> str:
    """What a process is: `python -m <package>`'s package, else its command's name."""
    try:
        args = (_PROC / str(pid) / "cmdline").read_bytes().split(b"\0")
        comm = (_PROC / str(pid) / "comm").read_text().strip()
    except OSError:
        return "?"
    if b"-m" in args[:-1]:
        return args[args.index(b"-m") + 1].decode(errors="replace")
    return comm


@dataclass
class _Peak:
    rss_kib: int = 0
    pss_kib: int = 0
    test: str = "(collection)"
    processes: int = 0
    parts: dict[str, int] = field(default_factory=dict)  # RSS by what the process is


@dataclass
class RunResources:
    run_id: str
    root: Path
    reaper: subprocess.Popen[bytes] | None = None
    current: str = "(collection)"
    peak: _Peak = field(default_factory=_Peak)
    leftover: list[str] = field(default_factory=list)
    # Per test: the largest RSS sum seen while it ran, and pytest's own share of it.
    by_test: dict[str, tuple[int, int]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def sample(self) -> None:
        exclude = {self.reaper.pid} if self.reaper else set()
        me = os.getpid()
        sizes = {p: _kib(p, "status", "VmRSS:") for p in [me, *run_processes(self.run_id, exclude)]}
        rss = sum(sizes.values())
        seen = self.by_test.get(self.current, (0, 0))
        self.by_test[self.current] = (max(seen[0], rss), max(seen[1], sizes[me]))
        if rss > self.peak.rss_kib:
            pss = sum(_kib(p, "smaps_rollup", "Pss:") for p in sizes)
            parts: dict[str, int] = {}
            for p, kib in sizes.items():
                name = "pytest" if p == me else _name(p)
                parts[name] = parts.get(name, 0) + kib
            self.peak = _Peak(rss, max(pss, self.peak.pss_kib), self.current, len(sizes), parts)

    def _loop(self) -> None:
        while not self._stop.wait(_SAMPLE_S):
            self.sample()

    def start_sampling(self) -> None:
        if _PROC.is_dir():
            self._thread = threading.Thread(target=self._loop, name="run-memory", daemon=True)
            self._thread.start()

    def stop_sampling(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.sample()

    def describe_leftovers(self) -> list[str]:
        exclude = {self.reaper.pid} if self.reaper else set()
        out = []
        for pid in run_processes(self.run_id, exclude):
            try:
                cmd = (_PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            out.append(f"{pid} {cmd.strip()[:160]}")
        return out


_KEY = pytest.StashKey[RunResources]()


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: the controller did this
        return
    run_id = uuid.uuid4().hex[:12]
    root = Path(tempfile.mkdtemp(prefix=f"her-os-test-{run_id}-"))
    root.chmod(0o755)  # an embedded server may run as another user when tests run as root
    os.environ[RUN_ENV] = run_id
    os.environ["TMPDIR"] = str(root)
    tempfile.tempdir = str(root)
    if config.option.basetemp is None:
        config.option.basetemp = str(root / "pytest")
    state = RunResources(run_id, root)
    if _PROC.is_dir():
        # Its own session: a terminal's Ctrl-C or a CI runner's kill of the process group
        # must not take the reaper with the run it cleans up after.
        state.reaper = subprocess.Popen(
            [sys.executable, str(_REAPER), str(os.getpid()), run_id, str(root)],
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={k: v for k, v in os.environ.items() if k != RUN_ENV},
        )
    state.start_sampling()
    config.stash[_KEY] = state


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> None:
    state = item.config.stash.get(_KEY, None)
    if state is not None:
        state.current = item.nodeid


def _release_freed_memory() -> None:
    """What a finished module's fixtures and models held, back to the system: collected, then
    glibc's free lists trimmed (onnxruntime, CTranslate2 and numpy free large blocks that
    malloc otherwise keeps for the process: the run's resident memory only ever grew)."""
    gc.collect()
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):
            pass


# A test that grew pytest by this much since the last release is followed by one: an app
# with its models, torn down, sits in reference cycles that the collector, counting objects
# rather than bytes, would not visit for many tests.
_GREW_KIB = 256 * 1024
_after_release = [0]


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    # After the module's last test its module-scoped fixtures have just been torn down.
    now = _kib(os.getpid(), "status", "VmRSS:")
    module_done = nextitem is None or nextitem.module is not item.module
    if module_done or now - _after_release[0] > _GREW_KIB:
        _release_freed_memory()
        _after_release[0] = _kib(os.getpid(), "status", "VmRSS:")
    state = item.config.stash.get(_KEY, None)
    trace = os.environ.get("HER_OS_TEST_MEMORY_TRACE")
    if state is not None and trace:
        with open(trace, "a", encoding="utf-8") as f:
            f.write(f"{item.nodeid}\t{_kib(os.getpid(), 'status', 'VmRSS:')}\n")


def pytest_sessionfinish(session: pytest.Session) -> None:
    state = session.config.stash.get(_KEY, None)
    if state is None:
        return
    state.current = "(teardown)"
    state.stop_sampling()
    # Session fixtures have been torn down by now: what still runs was left behind. A process
    # that is still on its way out gets a moment.
    deadline = time.monotonic() + 5
    while (left := state.describe_leftovers()) and time.monotonic() < deadline:
        time.sleep(0.2)
    state.leftover = left


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    state = terminalreporter.config.stash.get(_KEY, None)
    if state is None or not _PROC.is_dir():
        return
    gib = 1024 * 1024
    p = state.peak
    terminalreporter.section("resources of this run")
    terminalreporter.write_line(
        f"peak resident memory: {p.rss_kib / gib:.2f} GiB RSS summed, {p.pss_kib / gib:.2f} GiB "
        f"PSS summed, over {p.processes} processes (pytest and those it started), during "
        f"{p.test}"
    )
    terminalreporter.write_line(
        "at the peak: "
        + ", ".join(f"{n} {k / gib:.2f}" for n, k in sorted(p.parts.items(), key=lambda x: -x[1]))
        + " (GiB RSS)"
    )
    top = sorted(state.by_test.items(), key=lambda kv: -kv[1][0])[:5]
    terminalreporter.write_line(
        "largest while running: "
        + "; ".join(f"{t} {r / gib:.2f} GiB (pytest {o / gib:.2f})" for t, (r, o) in top)
    )
    terminalreporter.write_line(
        f"processes of the run left after the last test: {len(state.leftover)}"
        + "".join(f"\n  {x}" for x in state.leftover)
    )
    terminalreporter.write_line(f"temporary root: {state.root} (removed when pytest exits)")


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_KEY, None)
    if state is None:
        return
    state.stop_sampling()
    if state.reaper is None:
        shutil.rmtree(state.root, ignore_errors=True)
    # Otherwise the reaper sees this process end, stops what is left and removes the root.
