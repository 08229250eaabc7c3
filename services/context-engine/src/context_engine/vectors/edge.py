"""Qdrant Edge (qdrant-edge-py, in process, HNSW): the embedded vector store, the default.

One `EdgeShard` per space, stored as generations under `{vector_dir}/{space name}/`:

    space.json      {"model": ..., "dim": ..., "distance": "cosine" | "dot", "format": 1}
    CURRENT         the name of the live generation (replaced atomically)
    gen-<id>/       an EdgeShard directory (segments/, wal/, edge_config.json)

What qdrant-edge-py 0.9.0 does, measured on 2 cores, and what this module does about it:

- Every call holds the GIL for its whole duration: no other Python thread, the event loop
  included, runs meanwhile. So the shards live in a process of their own
  (vectors/edge_host.py), which this store starts, sends each call to and restarts if it
  goes away; the engine's threads wait for its answers with the GIL released. Calls are
  kept short — searches (1–4 ms at 1M points, warm), writes in batches of `batch` points
  (a few ms each). They are sent from worker threads (one writer thread, so writes apply
  in call order; two reader threads); the host answers them one at a time, so concurrent
  searches queue there: one core's worth, beside the event loop's.
- New points are searched exhaustively until `optimize()` builds the HNSW index (about
  15 ms per search at 100k unindexed points, 90 ms at 1M), and `optimize()` holds the GIL
  for as long as the build takes (40–100 s for 100k 384-d points from scratch, about
  17 min for 1M; a few seconds per 10k points added to an indexed shard, which Qdrant
  extends rather than rebuilds). So it never runs in this process: when `index_after`
  points are unindexed, the live shard is flushed and copied to a new generation, a child
  process (`python -m context_engine.vectors.edge build <dir>`, niced, killed with its
  parent) optimises the copy, and the copy replaces the live shard once its files are read
  into the page cache (a cold graph made the first searches 10x slower); writes that
  arrived during the build are kept in a journal and replayed into it first. Searches go
  on throughout.
- Updates are written to a write-ahead log before they apply; after an unclean stop
  (killed, no flush, no close) `load()` replays it and nothing acknowledged is lost (as
  far as the OS wrote the log; PostgreSQL stays the authority, and re-embedding a session
  repairs it). The shard is flushed every `flush_after` points written, before each build
  and on close, which bounds the replay. A build interrupted by a crash leaves a
  generation that CURRENT does not name: it is deleted when the space is next loaded.
- One EdgeShard per directory: the WAL is locked, so a second process (or a second store
  in this one) cannot open a space that is open; that is reported as VectorStoreError.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import qdrant_edge as qe

from context_engine.vectors.base import (
    HNSW_EF_CONSTRUCT,
    HNSW_M,
    INDEXED_FIELDS,
    SCAN_PAGE,
    SEARCH_EF,
    Distance,
    Kind,
    Prepared,
    SearchFilter,
    SegmentPointKey,
    SpaceName,
    UnknownSpaceError,
    VectorHit,
    VectorPoint,
    VectorStore,
    VectorStoreError,
    check_search,
    prepare,
    segment_key,
)
from context_engine.vectors.edge_host import Info, ShardHost, Update
from her_os_shared.children import die_with_parent
from her_os_shared.logging import get_logger
from her_os_shared.retry import Backoff

log = get_logger(__name__)
T = TypeVar("T")

# Segments holding less than this many KB of vectors are searched exhaustively (Qdrant's
# default: 10 MB, about 6,500 384-d vectors).
FULL_SCAN_THRESHOLD_KB = 10_000
# Unindexed points that start a background index build (exhaustive search over 20k
# 384-d points costs about 3 ms).
INDEX_AFTER = 20_000
# Points written between flushes (bounds the write-ahead log replayed after a crash).
FLUSH_AFTER = 20_000
BATCH = 256
FORMAT = 1

CURRENT = "CURRENT"
SPACE_FILE = "space.json"
GEN_PREFIX = "gen-"
_BUILD_RETRY = Backoff(30.0, 600.0)  # between tries to build a space's index


def _edge_error(what: str, exc: Exception) -> VectorStoreError:
    message = str(exc)
    if "WouldBlock" in message:
        return VectorStoreError(
            f"{what}: the shard is open elsewhere (another process or store uses it): {message}"
        )
    return VectorStoreError(f"{what}: {message}")


def _warm(path: Path, *, wait: bool) -> None:
    """Bring a generation's segment files into the page cache: read them (`wait`), or ask
    the kernel to read ahead in the background (best effort). The WAL is left out."""
    for file in (path / "segments").rglob("*"):
        if not file.is_file():
            continue
        try:
            with file.open("rb", buffering=0) as handle:
                if not wait:
                    if hasattr(os, "posix_fadvise"):
                        os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_WILLNEED)
                    continue
                while handle.read(8 << 20):
                    pass
        except OSError:
            continue


def _write_atomically(path: Path, content: str) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    with tmp.open("w") as handle:
        handle.write(content)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _Retired(Exception):
    """The generation was replaced while a reader was about to use it: read the new one."""


class _Generation:
    """One shard directory, open in the host. Readers hold it while they use it, so that a
    swap can wait for them before it closes the shard."""

    def __init__(self, path: Path, host: ShardHost) -> None:
        self.path = path
        self.key = str(path)  # the host's name for the shard
        self.host = host
        self._cond = threading.Condition()
        self._users = 0
        self._retired = False

    @contextlib.contextmanager
    def use(self) -> Iterator[str]:
        with self._cond:
            if self._retired:
                raise _Retired
            self._users += 1
        try:
            yield self.key
        finally:
            with self._cond:
                self._users -= 1
                self._cond.notify_all()

    def retire(self, *, flush: bool) -> None:
        """Refuse new readers, wait for the current ones, close the shard."""
        with self._cond:
            self._retired = True
            self._cond.wait_for(lambda: self._users == 0)
        self.host.call("close", self.key, flush)


@dataclass(eq=False)
class _Space:
    name: str
    root: Path
    model: str
    dim: int
    distance: Distance
    gen: _Generation | None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # writes, swaps, drop
    journal: list[Update] | None = None  # writes made while a build runs
    build: asyncio.Task[None] | None = None
    points: int = 0
    unindexed: int = 0
    build_floor: int = 0  # points the last build left unindexed
    dirty: int = 0  # points written since the last flush
    failures: int = 0
    retry_at: float = 0.0

    def live(self) -> _Generation:
        if self.gen is None:
            raise UnknownSpaceError(f"vector space {self.name} was dropped")
        return self.gen


class EdgeVectorStore(VectorStore):
    def __init__(
        self,
        directory: Path | str,
        *,
        prefix: str = "her_os",
        search_ef: int = SEARCH_EF,
        index_after: int = INDEX_AFTER,
        flush_after: int = FLUSH_AFTER,
        batch: int = BATCH,
        background_builds: bool = True,
    ) -> None:
        self.directory = Path(directory)
        self.prefix = prefix
        self.search_ef = search_ef
        self.index_after = index_after
        self.flush_after = flush_after
        self.batch = batch
        self.background_builds = background_builds
        self._spaces: dict[str, _Space] = {}
        self._load_lock = asyncio.Lock()
        self._writer: ThreadPoolExecutor | None = None
        self._readers: ThreadPoolExecutor | None = None
        self._host = ShardHost()
        self._closing = False

    # --- lifecycle ---

    async def open(self) -> None:
        if self._writer is not None:
            return
        await asyncio.to_thread(self.directory.mkdir, parents=True, exist_ok=True)
        self._closing = False
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="vectors-edge-write")
        self._readers = ThreadPoolExecutor(2, thread_name_prefix="vectors-edge-read")
        # Started from the writer thread, which lives as long as the store: the host's
        # parent-death signal follows the thread that started it.
        await self._write(self._host.start)
        log.info("vectors.edge.open", directory=str(self.directory), host=self._host.pid)

    async def close(self) -> None:
        """Stop builds (their child processes are killed), flush and close every shard."""
        writer, readers = self._writer, self._readers
        if writer is None or readers is None:
            return
        self._closing = True  # no new builds
        tasks = [sp.build for sp in self._spaces.values() if sp.build is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for sp in list(self._spaces.values()):
            async with sp.lock:
                with contextlib.suppress(VectorStoreError):  # a host that went away
                    await self._write(self._close_space, sp)
        self._spaces.clear()
        await self._write(self._host.stop)
        self._writer = self._readers = None
        await asyncio.to_thread(writer.shutdown, wait=True)
        await asyncio.to_thread(readers.shutdown, wait=True)
        log.info("vectors.edge.closed", directory=str(self.directory))

    def _pools(self) -> tuple[ThreadPoolExecutor, ThreadPoolExecutor]:
        if self._writer is None or self._readers is None:
            raise VectorStoreError("the edge vector store is not open (call open() first)")
        return self._writer, self._readers

    async def _write(self, fn: Callable[..., T], *args: Any) -> T:
        """Run on the writer thread: one at a time, in submission order."""
        writer, _ = self._pools()
        return await asyncio.get_running_loop().run_in_executor(writer, fn, *args)

    async def _read(self, fn: Callable[..., T], *args: Any) -> T:
        _, readers = self._pools()
        return await asyncio.get_running_loop().run_in_executor(readers, fn, *args)

    def _close_space(self, sp: _Space) -> None:
        gen, sp.gen = sp.gen, None
        if gen is not None:
            gen.retire(flush=True)

    # --- spaces ---

    async def _space(self, name: str, create: SpaceName | None = None) -> _Space:
        self._pools()
        if not self._host.alive:
            await self._restart_host()
        sp = self._spaces.get(name)
        if sp is None:
            async with self._load_lock:
                sp = self._spaces.get(name)
                if sp is None:
                    loaded = await self._write(self._load, name, create)
                    if loaded is None:
                        raise UnknownSpaceError(
                            f"vector space {name} does not exist (ensure_space first)"
                        )
                    sp = self._spaces[name] = loaded
                    log.info(
                        "vectors.edge.loaded", space=name, points=sp.points, unindexed=sp.unindexed
                    )
        self._maybe_build(sp)
        return sp

    async def _restart_host(self) -> None:
        """The host process went away (killed, crashed): start another and let every space
        load again from disk (the write-ahead logs replay what was acknowledged)."""
        async with self._load_lock:
            if self._host.alive or self._closing:
                return
            builds = [sp.build for sp in self._spaces.values() if sp.build is not None]
            for task in builds:
                task.cancel()
            await asyncio.gather(*builds, return_exceptions=True)
            self._spaces.clear()
            await self._write(self._host.start)
            log.warning("vectors.edge.host_restarted", starts=self._host.starts)

    def _load(self, name: str, create: SpaceName | None) -> _Space | None:
        """Open the space's live generation, or create the space (writer thread)."""
        root = self.directory / name
        current_file = root / CURRENT
        if not current_file.is_file():
            if create is None:
                return None
            if root.exists():  # a creation that never finished
                shutil.rmtree(root)
            root.mkdir(parents=True)
            meta = {
                "model": create.model,
                "dim": create.dim,
                "distance": create.distance,
                "format": FORMAT,
            }
            _write_atomically(root / SPACE_FILE, json.dumps(meta) + "\n")
            path = root / f"{GEN_PREFIX}{uuid.uuid4().hex}"
            config = (
                create.dim,
                create.distance,
                HNSW_M,
                HNSW_EF_CONSTRUCT,
                FULL_SCAN_THRESHOLD_KB,
            )
            try:
                self._host.call("create", str(path), config, dict(INDEXED_FIELDS))
            except Exception as exc:
                raise _edge_error(f"cannot create vector space {name}", exc) from exc
            _write_atomically(current_file, path.name + "\n")
            log.info("vectors.edge.created", space=name, model=create.model, dim=create.dim)
        else:
            meta = json.loads((root / SPACE_FILE).read_text())
            if meta.get("format") != FORMAT:
                raise VectorStoreError(f"vector space {name} has format {meta.get('format')}")
            path = root / current_file.read_text().strip()
            for stale in root.glob(f"{GEN_PREFIX}*"):
                if stale != path:  # a build that did not finish
                    log.warning("vectors.edge.stale_generation", space=name, path=str(stale))
                    shutil.rmtree(stale, ignore_errors=True)
            try:
                self._host.call("load", str(path))
            except Exception as exc:
                raise _edge_error(f"cannot load vector space {name} from {path}", exc) from exc
            _warm(path, wait=False)
        # A space.json without a distance predates dot spaces: it is cosine.
        sp = _Space(
            name,
            root,
            str(meta["model"]),
            int(meta["dim"]),
            meta.get("distance", "cosine"),
            _Generation(path, self._host),
        )
        self._refresh(sp)
        return sp

    def _refresh(self, sp: _Space, info: Info | None = None) -> None:
        points, indexed = info or self._host.call("info", sp.live().key)
        sp.points = points
        sp.unindexed = max(0, points - indexed)

    async def ensure_space(self, space: SpaceName) -> None:
        sp = await self._space(self.name_of(space), create=space)
        if (sp.model, sp.dim, sp.distance) != (space.model, space.dim, space.distance):
            raise VectorStoreError(
                f"vector space {sp.name} holds {sp.model}/{sp.dim} vectors by {sp.distance}, "
                f"not {space.model}/{space.dim} by {space.distance}"
            )

    async def spaces(self) -> list[str]:
        self._pools()
        # Listed here, not in the reader threads: a directory of a few entries takes
        # microseconds, and /health asks for it — it must not queue behind searches.
        if not self.directory.is_dir():
            return []
        return sorted(
            p.name
            for p in self.directory.iterdir()
            if p.name.startswith(f"{self.prefix}_") and (p / CURRENT).is_file()
        )

    async def drop_space(self, space: SpaceName | str) -> None:
        name = self.name_of(space)
        self._pools()
        async with self._load_lock:
            sp = self._spaces.get(name)
            if sp is not None:
                if sp.build is not None:
                    sp.build.cancel()
                    await asyncio.gather(sp.build, return_exceptions=True)
                async with sp.lock:
                    await self._write(self._close_space, sp)
                del self._spaces[name]
            root = self.directory / name
            await self._write(shutil.rmtree, root, True)
            log.info("vectors.edge.dropped", space=name)

    # --- writes ---

    def _apply(self, sp: _Space, update: Update, points: int) -> None:
        """Apply one update to the live shard, and to the journal while a build runs."""
        try:
            info = self._host.call("update", sp.live().key, [update])
        except Exception as exc:
            raise _edge_error(f"update of vector space {sp.name} failed", exc) from exc
        self._refresh(sp, info)  # the host answers an update with the shard's counts
        journal = sp.journal
        if journal is not None:
            journal.append(update)
        sp.dirty += points

    def _after_writes(self, sp: _Space) -> None:
        if sp.gen is None:
            return
        if sp.dirty >= self.flush_after:
            self._host.call("flush", sp.gen.key)
            sp.dirty = 0

    async def upsert(self, space: SpaceName, points: Sequence[VectorPoint]) -> None:
        prepared = prepare(space, points)
        if not prepared:
            return
        sp = await self._space(self.name_of(space))

        def upsert(chunk: list[Prepared]) -> Update:
            return ("upsert", [(p.id, p.vector, p.payload) for p in chunk])

        async with sp.lock:
            for i in range(0, len(prepared), self.batch):
                chunk = prepared[i : i + self.batch]
                await self._write(self._apply, sp, upsert(chunk), len(chunk))
            await self._write(self._after_writes, sp)
        self._maybe_build(sp)

    async def delete(self, space: SpaceName, ids: Sequence[str]) -> None:
        ids = [str(uuid.UUID(str(i))) for i in ids]  # ValueError on a malformed id
        if not ids:
            return
        sp = await self._space(self.name_of(space))
        step = self.batch * 4
        async with sp.lock:
            for i in range(0, len(ids), step):
                chunk = ids[i : i + step]
                await self._write(self._apply, sp, ("delete", chunk), len(chunk))
            await self._write(self._after_writes, sp)

    async def delete_session(self, space: SpaceName, session_id: str) -> None:
        sp = await self._space(self.name_of(space))
        flt = SearchFilter(session_ids=(session_id,))
        async with sp.lock:
            await self._write(self._apply, sp, ("delete_filter", flt), 1)
            await self._write(self._after_writes, sp)

    # --- reads ---

    def _with_live(self, sp: _Space, fn: Callable[[str], T]) -> T:
        """Run `fn` on the live shard (reader thread); a swap waits for it to finish."""
        while True:
            gen = sp.live()
            try:
                with gen.use() as shard:
                    return fn(shard)
            except _Retired:
                continue  # swapped meanwhile: use the new generation

    async def search(
        self,
        space: SpaceName,
        vector: np.ndarray,
        limit: int,
        *,
        kind: Kind | None = None,
        spoken_before: datetime | float | None = None,
        spoken_after: datetime | float | None = None,
        session_ids: Sequence[str] | None = None,
    ) -> list[VectorHit]:
        query, flt = check_search(
            space, vector, limit, kind, spoken_before, spoken_after, session_ids
        )
        sp = await self._space(self.name_of(space))
        if flt.empty_result:
            return []

        def run(key: str) -> list[VectorHit]:
            try:
                found = self._host.call("query", key, query, limit, flt, self.search_ef)
            except Exception as exc:
                raise _edge_error(f"search of vector space {sp.name} failed", exc) from exc
            return [VectorHit(*hit) for hit in found]

        return await self._read(self._with_live, sp, run)

    async def count(self, space: SpaceName) -> int:
        sp = await self._space(self.name_of(space))
        return int(await self._read(self._with_live, sp, lambda key: self._host.call("count", key)))

    async def segment_points(self, space: SpaceName | str) -> list[SegmentPointKey]:
        sp = await self._space(self.name_of(space))
        out: list[SegmentPointKey] = []
        offset: Any = None
        fields = ["kind", "session_id", "segment_id"]
        while True:
            records, offset = await self._read(
                self._with_live,
                sp,
                lambda key, o=offset: self._host.call("scroll", key, o, SCAN_PAGE, fields),
            )
            out.extend(k for rid, payload in records if (k := segment_key(rid, payload)))
            if offset is None:
                return out

    async def stats(self, space: SpaceName) -> dict[str, Any]:
        """Points, unindexed points and whether an index build is running."""
        sp = await self._space(self.name_of(space))
        return {
            "points": sp.points,
            "unindexed": sp.unindexed,
            "building": sp.build is not None,
            "generation": sp.live().path.name,
        }

    # --- background index builds ---

    def _maybe_build(self, sp: _Space) -> None:
        if (
            self.background_builds
            and not self._closing
            and sp.build is None
            and sp.gen is not None
            and self._writer is not None
            and sp.unindexed >= sp.build_floor + self.index_after
            and time.monotonic() >= sp.retry_at
        ):
            self._start_build(sp)

    def _start_build(self, sp: _Space) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(self._build(sp), name=f"index {sp.name}")
        sp.build = task
        return task

    async def build_index(self, space: SpaceName) -> None:
        """Index every unindexed point now (in a child process) and wait for it; joins a
        build that is already running. Raises VectorStoreError when the build fails."""
        sp = await self._space(self.name_of(space))
        if self._closing:
            raise VectorStoreError("the edge vector store is closing")
        task = sp.build
        if task is not None:
            await asyncio.shield(task)
        failures = sp.failures
        await asyncio.shield(sp.build or self._start_build(sp))
        if sp.failures > failures:
            raise VectorStoreError(f"index build of vector space {sp.name} failed (see log)")

    async def _build(self, sp: _Space) -> None:
        started = time.monotonic()
        swapped = False
        try:
            async with sp.lock:
                new_path = await self._write(self._snapshot, sp)
            await self._run_builder(new_path)
            # outside the lock, so writes go on; reading releases the GIL
            await asyncio.to_thread(_warm, new_path, wait=True)
            async with sp.lock:
                await self._write(self._swap, sp, new_path)
            swapped = True
            sp.failures, sp.retry_at = 0, 0.0
            log.info(
                "vectors.edge.indexed",
                space=sp.name,
                points=sp.points,
                unindexed=sp.unindexed,
                seconds=round(time.monotonic() - started, 2),
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            sp.failures += 1
            delay = _BUILD_RETRY.delay(sp.failures - 1)
            sp.retry_at = time.monotonic() + delay
            log.warning("vectors.edge.index_failed", space=sp.name, error=str(exc), retry_s=delay)
        finally:
            if not swapped and self._writer is not None:
                # On the writer thread, so after a snapshot or swap that a cancellation
                # left running there (a swap that completed keeps its generation).
                cleanup = asyncio.get_running_loop().run_in_executor(
                    self._writer, self._discard, sp
                )
                with contextlib.suppress(BaseException):
                    await asyncio.shield(cleanup)
            sp.build = None

    def _snapshot(self, sp: _Space) -> Path:
        """Flush the live shard and copy it to a new generation (writer thread)."""
        gen = sp.live()
        self._host.call("flush", gen.key)
        sp.dirty = 0
        new_path = sp.root / f"{GEN_PREFIX}{uuid.uuid4().hex}"
        shutil.copytree(gen.path, new_path)
        sp.journal = []
        return new_path

    async def _run_builder(self, path: Path) -> None:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "context_engine.vectors.edge",
            "build",
            str(path),
            str(os.getpid()),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            _, err = await proc.communicate()
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            with contextlib.suppress(BaseException):
                await asyncio.shield(proc.wait())
            raise
        if proc.returncode != 0:
            tail = err.decode(errors="replace").strip()[-2000:]
            raise VectorStoreError(f"index build exited with {proc.returncode}: {tail}")

    def _swap(self, sp: _Space, new_path: Path) -> None:
        """Open the built copy, replay the journal into it, make it live (writer thread)."""
        old = sp.live()
        key = str(new_path)
        try:
            self._host.call("load", key)
        except Exception as exc:
            raise _edge_error(f"cannot load the built index of {sp.name}", exc) from exc
        try:
            info = self._host.call("update", key, sp.journal or [])
            _write_atomically(sp.root / CURRENT, new_path.name + "\n")
        except Exception as exc:
            with contextlib.suppress(Exception):
                self._host.call("close", key, False)
            if isinstance(exc, OSError):
                raise
            raise _edge_error(f"cannot replay writes into the index of {sp.name}", exc) from exc
        sp.gen, sp.journal = _Generation(new_path, self._host), None
        old.retire(flush=False)
        shutil.rmtree(old.path, ignore_errors=True)
        self._refresh(sp, info)
        sp.build_floor = sp.unindexed

    def _discard(self, sp: _Space) -> None:
        """Forget a build that did not complete: its journal and its copy (writer thread)."""
        sp.journal = None
        live = sp.gen.path if sp.gen is not None else None
        for path in sp.root.glob(f"{GEN_PREFIX}*"):
            if path != live:
                shutil.rmtree(path, ignore_errors=True)


# --- the index builder (child process) ---------------------------------------------------


def build(path: str) -> None:
    """Optimise the shard at `path` (build its HNSW index), flush, close."""
    shard = qe.EdgeShard.load(path)
    try:
        shard.optimize()
        shard.flush()
    finally:
        shard.close()


def main(argv: Sequence[str]) -> int:
    if len(argv) != 3 or argv[0] != "build":
        print("usage: python -m context_engine.vectors.edge build SHARD_DIR PARENT_PID")
        return 2
    die_with_parent(int(argv[2]))
    with contextlib.suppress(OSError):
        os.nice(10)  # the serving process keeps the cores it needs
    build(argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
