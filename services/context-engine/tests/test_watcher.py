"""TranscriptWatcher against a real directory and the real inotify observer.

Timings are small (debounce 0.15 s) but every wait polls against a generous deadline, and no
assertion puts an upper bound on how fast the watcher reacts: only on how often it calls.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from context_engine.ingest import watcher as watcher_module
from context_engine.ingest.watcher import TranscriptWatcher

DEBOUNCE = 0.15
MAX_DELAY = 0.5
RETRY = 0.3
SETTLE = 4 * DEBOUNCE  # quiet time after idle() before asserting "no further calls"
DEADLINE = 8.0


def append_atomic(path: Path, data: bytes = b'{"t":"x"}\n') -> int:
    """Append like the audio pipeline: copy + append into `.{name}.tmp`, rename over the file.
    Returns the new size."""
    tmp = path.with_name(f".{path.name}.tmp")
    old = path.read_bytes() if path.exists() else b""
    tmp.write_bytes(old + data)
    os.rename(tmp, path)
    return len(old) + len(data)


def file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return -1


@dataclass
class Call:
    path: Path
    at: float  # time.monotonic() when the handler started
    size: int  # file size the handler saw when it started (-1: file missing)


@dataclass
class RecordingHandler:
    """Test double for the ingest handler: records calls and detects self-overlap."""

    hold_s: float = 0.0  # async work per call, to widen overlap windows
    fail_first: int = 0  # number of initial calls that raise
    gate: asyncio.Event | None = None  # if set, calls wait on it (released by the test)
    calls: list[Call] = field(default_factory=list)
    in_flight: set[Path] = field(default_factory=set)
    overlaps: list[Path] = field(default_factory=list)
    started: asyncio.Event = field(default_factory=asyncio.Event)

    async def __call__(self, path: Path) -> None:
        if path in self.in_flight:
            self.overlaps.append(path)
        self.in_flight.add(path)
        try:
            size = file_size(path)  # what an ingest pass would read
            self.calls.append(Call(path, time.monotonic(), size))
            self.started.set()
            if self.gate is not None:
                await self.gate.wait()
            if self.hold_s:
                await asyncio.sleep(self.hold_s)
            if len(self.calls) <= self.fail_first:
                raise RuntimeError(f"boom {len(self.calls)}")
        finally:
            self.in_flight.discard(path)

    def count(self, path: Path) -> int:
        return sum(1 for c in self.calls if c.path == path)

    def last_size(self, path: Path) -> int | None:
        sizes = [c.size for c in self.calls if c.path == path]
        return sizes[-1] if sizes else None

    def paths(self) -> set[Path]:
        return {c.path for c in self.calls}


class RecordingLog:
    """Stands in for the module's structlog logger."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def _record(self, event: str, **kw: Any) -> None:
        self.events.append((event, kw))

    debug = info = warning = error = exception = _record

    def named(self, event: str) -> list[dict[str, Any]]:
        return [kw for name, kw in self.events if name == event]


async def wait_for(predicate: Callable[[], bool], what: str, within: float = DEADLINE) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {within}s waiting for: {what}")
        await asyncio.sleep(0.02)


async def settle(watcher: TranscriptWatcher) -> None:
    """Idle, stay quiet a while (late events would re-arm timers), and be idle again."""
    await asyncio.wait_for(watcher.idle(), DEADLINE)
    await asyncio.sleep(SETTLE)
    await asyncio.wait_for(watcher.idle(), DEADLINE)


@pytest.fixture
async def make_watcher() -> AsyncIterator[Callable[..., TranscriptWatcher]]:
    created: list[TranscriptWatcher] = []

    def make(directory: Path, handler: RecordingHandler, **kw: Any) -> TranscriptWatcher:
        options: dict[str, Any] = {
            "debounce_s": DEBOUNCE,
            "max_delay_s": MAX_DELAY,
            "retry_delay_s": RETRY,
            "reconcile_interval_s": 60.0,  # tests that want the loop pass their own
            **kw,
        }
        w = TranscriptWatcher(directory, handler, **options)
        created.append(w)
        return w

    yield make
    for w in created:
        await asyncio.wait_for(w.stop(), DEADLINE)


@pytest.fixture
def log(monkeypatch: pytest.MonkeyPatch) -> RecordingLog:
    fake = RecordingLog()
    monkeypatch.setattr(watcher_module, "log", fake)
    return fake


async def test_backlog_files_are_handled_once_each(tmp_path, make_watcher):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    append_atomic(a)
    append_atomic(b)
    handler = RecordingHandler()
    w = make_watcher(tmp_path, handler)
    await w.start()

    await wait_for(lambda: handler.paths() == {a, b}, "both backlog files handled")
    await settle(w)
    assert handler.count(a) == 1
    assert handler.count(b) == 1


async def test_start_creates_missing_directory(tmp_path, make_watcher):
    directory = tmp_path / "not" / "yet"
    handler = RecordingHandler()
    await make_watcher(directory, handler).start()
    assert directory.is_dir()
    target = directory / "s.jsonl"
    size = await asyncio.to_thread(append_atomic, target)
    await wait_for(lambda: handler.last_size(target) == size, "file handled")


async def test_file_renamed_into_place_after_start_is_handled(tmp_path, make_watcher):
    handler = RecordingHandler()
    await make_watcher(tmp_path, handler).start()
    target = tmp_path / "session-1.jsonl"
    size = await asyncio.to_thread(append_atomic, target)
    await wait_for(lambda: handler.last_size(target) == size, "renamed file handled")


async def test_rapid_appends_within_debounce_are_handled_once(tmp_path, make_watcher):
    handler = RecordingHandler()
    # The default debounce (1 s): with 0.2 s, a 2-core CI machine once stalled the observer's
    # events long enough mid-burst to handle the file twice.
    w = make_watcher(tmp_path, handler, debounce_s=1.0, max_delay_s=5.0)
    await w.start()
    target = tmp_path / "burst.jsonl"

    def burst() -> tuple[int, float]:
        began = time.monotonic()
        size = 0
        for _ in range(20):
            size = append_atomic(target)
        return size, time.monotonic() - began

    size, took = await asyncio.to_thread(burst)
    if took >= 0.5:
        pytest.skip(f"machine too slow: 20 appends took {took:.3f}s, the test needs < 0.5s")
    await wait_for(lambda: handler.count(target) >= 1, "burst handled")
    await settle(w)
    assert handler.count(target) == 1
    assert handler.last_size(target) == size


async def test_continuously_appended_file_is_handled_before_appends_stop(tmp_path, make_watcher):
    # Appends every 50 ms never leave a 150 ms gap, so only max_delay can trigger a call.
    handler = RecordingHandler()
    w = make_watcher(tmp_path, handler)
    await w.start()
    target = tmp_path / "live.jsonl"

    def stream() -> tuple[int, float]:
        size = 0
        for _ in range(50):  # ~2.5 s
            size = append_atomic(target)
            time.sleep(0.05)
        return size, time.monotonic()

    size, ended = await asyncio.to_thread(stream)
    await wait_for(lambda: handler.last_size(target) == size, "final state handled")
    await settle(w)
    first = handler.calls[0]
    assert first.at < ended, "not handled until the appends stopped: max_delay_s ignored"
    assert handler.last_size(target) == size
    assert handler.overlaps == []


async def test_events_during_a_run_cause_exactly_one_more_call(tmp_path, make_watcher):
    gate = asyncio.Event()
    handler = RecordingHandler(gate=gate)
    w = make_watcher(tmp_path, handler)
    await w.start()
    target = tmp_path / "busy.jsonl"
    await asyncio.to_thread(append_atomic, target)
    await asyncio.wait_for(handler.started.wait(), DEADLINE)

    def more() -> int:
        size = 0
        for _ in range(5):
            size = append_atomic(target)
            time.sleep(0.01)
        return size

    size = await asyncio.to_thread(more)
    await asyncio.sleep(0.5)  # let the events reach the watcher while the first call is held
    assert handler.count(target) == 1  # never a second concurrent call
    gate.set()

    await wait_for(lambda: handler.count(target) >= 2, "second call after the held one")
    await settle(w)
    assert handler.count(target) == 2
    assert handler.last_size(target) == size
    assert handler.overlaps == []


async def test_dot_files_and_other_names_are_ignored(tmp_path, make_watcher):
    # Present before start (backlog) ...
    (tmp_path / ".old.jsonl.tmp").write_bytes(b"x\n")
    (tmp_path / "old.txt").write_bytes(b"x\n")
    (tmp_path / "dir.jsonl").mkdir()
    handler = RecordingHandler()
    w = make_watcher(tmp_path, handler)
    await w.start()

    def noise() -> None:
        # ... and written after start (events).
        (tmp_path / ".s.lock").write_bytes(b"")
        (tmp_path / ".s.jsonl.tmp").write_bytes(b"x\n")
        (tmp_path / ".hidden.jsonl").write_bytes(b"x\n")
        (tmp_path / "notes.txt").write_bytes(b"x\n")
        (tmp_path / "s.jsonl.bak").write_bytes(b"x\n")
        (tmp_path / "sub.jsonl").mkdir()

    await asyncio.to_thread(noise)
    real = tmp_path / "real.jsonl"
    await asyncio.to_thread(append_atomic, real)  # a sentinel: once it is handled, so is noise
    await wait_for(lambda: handler.count(real) >= 1, "sentinel handled")
    await settle(w)
    assert handler.paths() == {real}
    assert await w.reconcile() == 1


async def test_failing_handler_is_logged_and_retried(tmp_path, make_watcher, log):
    handler = RecordingHandler(fail_first=1)
    w = make_watcher(tmp_path, handler)
    await w.start()
    target = tmp_path / "flaky.jsonl"
    size = await asyncio.to_thread(append_atomic, target)

    await wait_for(lambda: handler.count(target) >= 2, "retry after failure")
    await settle(w)
    assert handler.count(target) == 2
    assert handler.calls[1].at - handler.calls[0].at >= RETRY * 0.9  # waited for the retry
    assert handler.last_size(target) == size
    failures = log.named("watcher.handle_failed")
    assert len(failures) == 1
    assert failures[0]["path"] == str(target)
    assert "boom" in failures[0]["error"]

    # The watcher survived: new work is still handled.
    other = tmp_path / "other.jsonl"
    await asyncio.to_thread(append_atomic, other)
    await wait_for(lambda: handler.count(other) == 1, "watcher still works")


async def test_reconcile_follows_is_current(tmp_path, make_watcher):
    fresh, stale = tmp_path / "fresh.jsonl", tmp_path / "stale.jsonl"
    append_atomic(fresh)
    append_atomic(stale)
    stale_paths = {stale}
    seen: list[tuple[Path, int]] = []

    def is_current(path: Path, st: os.stat_result) -> bool:
        seen.append((path, st.st_size))
        return path not in stale_paths

    handler = RecordingHandler()
    w = make_watcher(tmp_path, handler, is_current=is_current)
    await w.start()
    await wait_for(lambda: handler.paths() == {fresh, stale}, "backlog handled")
    await settle(w)

    assert await w.reconcile() == 1
    await wait_for(lambda: handler.count(stale) == 2, "stale file handled again")
    await settle(w)
    assert handler.count(fresh) == 1
    assert (fresh, fresh.stat().st_size) in seen  # is_current got the file's stat

    stale_paths.clear()
    assert await w.reconcile() == 0
    await settle(w)
    assert handler.count(stale) == 2


async def test_without_is_current_reconcile_schedules_everything(tmp_path, make_watcher):
    files = [tmp_path / f"{n}.jsonl" for n in "abc"]
    for f in files:
        append_atomic(f)
    handler = RecordingHandler()
    w = make_watcher(tmp_path, handler)
    await w.start()
    await wait_for(lambda: handler.paths() == set(files), "backlog handled")
    await settle(w)
    assert await w.reconcile() == 3
    await wait_for(lambda: all(handler.count(f) == 2 for f in files), "all handled again")


async def test_periodic_reconcile_survives_errors_and_finds_files(tmp_path, make_watcher, log):
    # Deleting the directory kills the inotify watch; the reconcile loop logs the failed
    # scans, keeps going, and picks the files up once the directory is back.
    directory = tmp_path / "transcripts"
    handler = RecordingHandler()
    w = make_watcher(directory, handler, reconcile_interval_s=0.2, is_current=lambda p, s: False)
    await w.start()
    shutil.rmtree(directory)
    await wait_for(lambda: bool(log.named("watcher.reconcile_failed")), "a failed scan is logged")

    directory.mkdir()
    target = directory / "back.jsonl"
    size = await asyncio.to_thread(append_atomic, target)
    await wait_for(lambda: handler.last_size(target) == size, "file found by reconcile")


async def test_files_written_while_start_runs_are_all_handled(tmp_path, make_watcher):
    handler = RecordingHandler(hold_s=0.01)
    w = make_watcher(tmp_path, handler, concurrency=4)
    names = [tmp_path / f"s{i:02d}.jsonl" for i in range(30)]
    final: dict[Path, int] = {}
    go = threading.Event()

    def writer() -> None:
        go.set()
        for _ in range(4):
            for path in names:
                final[path] = append_atomic(path)
                time.sleep(0.001)

    thread = threading.Thread(target=writer)
    thread.start()
    go.wait()
    await w.start()  # racing the writer: some files precede the observer, some follow it
    await asyncio.to_thread(thread.join)

    await wait_for(
        lambda: all(handler.last_size(p) == final[p] for p in names), "final state of every file"
    )
    await settle(w)
    assert handler.paths() == set(names)
    assert all(handler.last_size(p) == final[p] for p in names)  # no lost update
    assert handler.overlaps == []


async def test_stop_waits_for_running_handler_and_ignores_later_events(tmp_path, make_watcher):
    gate = asyncio.Event()
    handler = RecordingHandler(gate=gate)
    w = make_watcher(tmp_path, handler)
    await w.start()
    target = tmp_path / "s.jsonl"
    await asyncio.to_thread(append_atomic, target)
    await asyncio.wait_for(handler.started.wait(), DEADLINE)

    stopping = asyncio.create_task(w.stop())
    await asyncio.sleep(0.2)
    assert not stopping.done()  # still waiting for the held handler
    gate.set()
    await asyncio.wait_for(stopping, DEADLINE)
    assert handler.in_flight == set()

    await asyncio.to_thread(append_atomic, target)
    await asyncio.sleep(SETTLE)
    assert handler.count(target) == 1
