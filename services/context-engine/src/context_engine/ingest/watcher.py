"""Watch the transcript directory and hand each changed `*.jsonl` file to an async handler.

The audio pipeline appends by writing `.{id}.jsonl.tmp` and renaming it over `{id}.jsonl`, so
every append is a new inode and inotify reports it as a move onto the `.jsonl` name. Dot-files
(temp files, locks) are never handled.

Guarantees, in the order `start()` sets them up:

1. The watchdog observer starts first, so any write after that point produces an event.
2. A backlog scan then schedules every existing file, so writes from before (or racing) the
   observer's start are not missed: a file is either seen by the scan or produces an event.
3. A periodic reconcile scan schedules files the caller's `is_current` says are stale, as a
   safety net for dropped events (inotify queue overflow, directory recreated, ...).

Per file, events are debounced on the trailing edge (`debounce_s` after the latest event) but
never held longer than `max_delay_s` after the first unhandled one, so a file appended to
continuously is still handled. A file is never handled twice at once: events during a run mark
it dirty and it is handled once more afterwards. The handler must therefore be idempotent and
read whatever the file holds when it runs (e.g. from a stored offset).

Threading: watchdog calls back on its own thread; those callbacks only filter names and cross
into the event loop with `loop.call_soon_threadsafe`. All other state is touched on the loop
thread only, so no locks are needed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path

from watchdog.events import (
    FileClosedEvent,
    FileCreatedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

from her_os_shared.logging import get_logger
from her_os_shared.retry import Backoff

log = get_logger(__name__)

FileHandler = Callable[[Path], Awaitable[None]]
IsCurrent = Callable[[Path, os.stat_result], bool]

SUFFIX = ".jsonl"
# Limits the kernel-side inotify mask too (watchdog derives it from the filter), so opens and
# no-write closes (every reader of the file) never wake us.
_EVENT_FILTER: list[type[FileSystemEvent]] = [
    FileCreatedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileClosedEvent,
]


def is_transcript_name(name: str) -> bool:
    """A transcript file: `*.jsonl` and not a dot-file (temp files and locks are dot-files)."""
    return name.endswith(SUFFIX) and not name.startswith(".") and name != SUFFIX


class SeenFiles:
    """What a reader of the watched files has read of each (size, mtime), so the periodic
    reconcile skips files that did not change. Sizes stored in PostgreSQL seed it at start
    (their mtime unknown: a file of that size counts as read)."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[int, int | None]] = {}

    def seed(self, sizes: Iterable[tuple[str, int]]) -> None:
        for path, size in sizes:
            self._seen[path] = (size, None)

    def remember(self, key: str, st: os.stat_result) -> None:
        self._seen[key] = (st.st_size, st.st_mtime_ns)

    def is_current(self, path: Path, st: os.stat_result) -> bool:
        seen = self._seen.get(str(path))
        if seen is None:
            return False
        size, mtime_ns = seen
        return size == st.st_size and (mtime_ns is None or mtime_ns == st.st_mtime_ns)


class _EventBridge(FileSystemEventHandler):
    """Runs on watchdog's thread: filters names, then hops onto the event loop."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, directory: str, notify: Callable[[str], None]
    ) -> None:
        self._loop = loop
        self._directory = directory
        self._notify = notify

    def _forward(self, raw: bytes | str) -> None:
        if not raw:
            return
        path = os.fsdecode(raw)
        # Non-recursive watch, but a move can name a path outside the directory.
        if os.path.dirname(path) != self._directory:
            return
        if not is_transcript_name(os.path.basename(path)):
            return
        # The loop may already be closed during interpreter shutdown; nothing left to do then.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._notify, path)

    def on_created(self, event: FileSystemEvent) -> None:
        if not event.is_directory:
            self._forward(event.src_path)

    def on_modified(self, event: FileSystemEvent) -> None:
        if not event.is_directory:
            self._forward(event.src_path)

    def on_closed(self, event: FileSystemEvent) -> None:
        self._forward(event.src_path)

    def on_moved(self, event: FileSystemEvent) -> None:
        # The atomic writer's rename: the interesting name is the destination.
        if not event.is_directory:
            self._forward(event.dest_path)


class TranscriptWatcher:
    """Debounced, deduplicated, concurrency-limited dispatch of changed transcript files."""

    def __init__(
        self,
        directory: Path,
        handle: FileHandler,
        *,
        debounce_s: float = 1.0,
        max_delay_s: float = 3.0,
        reconcile_interval_s: float = 30.0,
        retry_delay_s: float = 5.0,
        retry_max_s: float = 60.0,
        retry_jitter: float = 0.2,
        concurrency: int = 4,
        is_current: IsCurrent | None = None,
        name: str = "transcript",
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if max_delay_s < debounce_s:
            raise ValueError("max_delay_s must be at least debounce_s")
        # Absolute, not resolved: keys must match the paths watchdog builds from this string.
        self._dir = Path(os.path.abspath(directory))
        self._handle = handle
        self._debounce_s = debounce_s
        self._max_delay_s = max_delay_s
        self._reconcile_interval_s = reconcile_interval_s
        # a file whose handler keeps failing is retried less and less often
        self._retry = Backoff(retry_delay_s, max(retry_max_s, retry_delay_s), retry_jitter)
        self._is_current = is_current
        self._name = name  # in task names and logs: this class also watches the events files
        self._sem = asyncio.Semaphore(concurrency)

        self._loop: asyncio.AbstractEventLoop | None = None
        self._observer: BaseObserver | None = None
        self._reconcile_task: asyncio.Task[None] | None = None
        self._closed = False

        # Per-path state; a path is in at most one of timers / queued / running at a time.
        self._timers: dict[Path, asyncio.TimerHandle] = {}
        self._deadline: dict[Path, float] = {}  # loop time by which an armed timer must fire
        self._queued: set[Path] = set()  # fired, waiting for a semaphore slot
        self._running: set[Path] = set()  # handler in progress
        self._dirty: dict[Path, float] = {}  # changed while running -> loop time of 1st change
        self._backoff: dict[Path, float] = {}  # failed: not before this loop time
        self._failures: dict[Path, int] = {}  # failed runs in a row
        self._tasks: set[asyncio.Task[None]] = set()
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def directory(self) -> Path:
        return self._dir

    async def start(self) -> None:
        """Start watching; call from inside the running event loop."""
        if self._observer is not None or self._closed:
            raise RuntimeError("TranscriptWatcher can only be started once")
        self._loop = asyncio.get_running_loop()
        self._dir.mkdir(parents=True, exist_ok=True)

        # Observer first: watchdog adds the inotify watch synchronously inside start(), so from
        # here on every write yields an event, and the scan below covers everything before.
        observer = Observer()
        observer.schedule(
            _EventBridge(self._loop, str(self._dir), self._on_fs_event),
            str(self._dir),
            recursive=False,
            event_filter=_EVENT_FILTER,
        )
        observer.start()
        self._observer = observer
        try:
            backlog = await asyncio.to_thread(self._scan)
        except BaseException:
            await self.stop()
            raise
        for path, _ in backlog:
            self.touch(path, 0.0)
        self._reconcile_task = asyncio.create_task(
            self._reconcile_loop(), name=f"{self._name}-watcher-reconcile"
        )
        log.info("watcher.started", watcher=self._name, path=str(self._dir), backlog=len(backlog))

    async def stop(self) -> None:
        """Stop the observer, cancel timers and wait for handlers already running."""
        self._closed = True
        if self._reconcile_task is not None:
            self._reconcile_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reconcile_task
            self._reconcile_task = None
        if self._observer is not None:
            observer, self._observer = self._observer, None
            # join() blocks until watchdog's threads exit; keep that off the loop thread.
            await asyncio.to_thread(_stop_observer, observer)
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._deadline.clear()
        self._dirty.clear()
        # Queued tasks see _closed and return without calling the handler; running ones finish.
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        self._update_idle()
        log.info("watcher.stopped", watcher=self._name, path=str(self._dir))

    def touch(self, path: Path, delay: float | None = None) -> None:
        """Schedule `path` to be handled after `delay` (default: the debounce). Loop thread only.

        Re-arms the path's timer (trailing-edge debounce), capped by the deadline set at its
        first unhandled event; a path that is running is marked dirty instead.
        """
        if self._closed:
            return
        loop = self._require_loop()
        path = Path(os.path.abspath(path))
        now = loop.time()
        if path in self._queued:
            return  # its handler has not started yet, so it will see this change anyway
        if path in self._running:
            self._dirty.setdefault(path, now)
            self._update_idle()
            return
        wait = self._debounce_s if delay is None else max(0.0, delay)
        deadline = self._deadline.setdefault(path, now + max(self._max_delay_s, wait))
        # A failing file is not retried early just because it keeps changing.
        when = max(min(now + wait, deadline), self._backoff.get(path, 0.0))
        timer = self._timers.pop(path, None)
        if timer is not None:
            timer.cancel()
        self._timers[path] = loop.call_at(when, self._fire, path)
        self._update_idle()

    async def reconcile(self) -> int:
        """Scan once and schedule every file `is_current` does not vouch for; return the count."""
        entries = await asyncio.to_thread(self._scan)
        scheduled = 0
        for path, st in entries:
            if self._is_current is not None:
                try:
                    if self._is_current(path, st):
                        continue
                except Exception as exc:
                    # Unknown state: handling it again is safe, skipping it might lose data.
                    log.warning("watcher.is_current_failed", path=str(path), error=repr(exc))
            self.touch(path, 0.0)
            scheduled += 1
        log.debug("watcher.reconciled", files=len(entries), scheduled=scheduled)
        return scheduled

    async def idle(self) -> None:
        """Wait until no timer is armed, no handler is queued or running and nothing is dirty."""
        # Re-check after waking: the event may have been set and cleared again meanwhile.
        while not self._is_idle():
            self._idle.clear()
            await self._idle.wait()

    # -- internals (loop thread) -------------------------------------------------------------

    def _require_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError("TranscriptWatcher.start() has not been called")
        return self._loop

    def _on_fs_event(self, path: str) -> None:
        self.touch(Path(path))

    def _fire(self, path: Path) -> None:
        self._timers.pop(path, None)
        self._deadline.pop(path, None)
        if not self._closed:
            self._queued.add(path)
            task = self._require_loop().create_task(
                self._run(path), name=f"{self._name}:{path.name}"
            )
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        self._update_idle()

    async def _run(self, path: Path) -> None:
        failed = cancelled = False
        retry_in = 0.0
        try:
            async with self._sem:
                self._queued.discard(path)
                if self._closed:
                    return
                self._running.add(path)
                try:
                    await self._handle(path)
                except asyncio.CancelledError:
                    cancelled = True  # shutting down: do not schedule new work
                    raise
                except Exception as exc:
                    failed = True
                    failures = self._failures[path] = self._failures.get(path, 0) + 1
                    retry_in = self._retry.delay(failures - 1)
                    log.exception(
                        "watcher.handle_failed",
                        path=str(path),
                        error=repr(exc),
                        retry_in_s=round(retry_in, 3),
                    )
        finally:
            self._queued.discard(path)
            self._running.discard(path)
            first_change = self._dirty.pop(path, None)
            if not (self._closed or cancelled):
                self._reschedule(path, failed=failed, first_change=first_change, retry_in=retry_in)
            self._update_idle()

    def _reschedule(
        self, path: Path, *, failed: bool, first_change: float | None, retry_in: float = 0.0
    ) -> None:
        loop = self._require_loop()
        if failed:
            if not os.path.exists(path):
                # Retrying a deleted file would fail forever; a new write re-triggers it.
                self._backoff.pop(path, None)
                self._failures.pop(path, None)
                log.info("watcher.file_gone", path=str(path))
                return
            self._backoff[path] = loop.time() + retry_in
            self.touch(path, 0.0)  # lands on the backoff time
            return
        self._backoff.pop(path, None)
        self._failures.pop(path, None)
        if first_change is not None:
            # Changed mid-run: run once more, debounced, still bounded by the first change.
            self._deadline[path] = first_change + self._max_delay_s
            self.touch(path)

    async def _reconcile_loop(self) -> None:
        while True:
            await asyncio.sleep(self._reconcile_interval_s)
            try:
                await self.reconcile()
            except Exception as exc:
                log.exception("watcher.reconcile_failed", path=str(self._dir), error=repr(exc))

    def _is_idle(self) -> bool:
        return not (self._timers or self._queued or self._running or self._dirty)

    def _update_idle(self) -> None:
        if self._is_idle():
            self._idle.set()
        else:
            self._idle.clear()

    # -- worker thread -----------------------------------------------------------------------

    def _scan(self) -> list[tuple[Path, os.stat_result]]:
        """List transcript files with their stat; files that vanish meanwhile are skipped."""
        found: list[tuple[Path, os.stat_result]] = []
        with os.scandir(self._dir) as entries:
            for entry in entries:
                if not is_transcript_name(entry.name):
                    continue
                path = self._dir / entry.name
                try:
                    st = os.stat(path)
                except FileNotFoundError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    found.append((path, st))
        found.sort(key=lambda item: item[0].name)
        return found


def _stop_observer(observer: BaseObserver) -> None:
    observer.stop()
    observer.join()
