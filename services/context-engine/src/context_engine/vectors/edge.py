"""Qdrant Edge (qdrant-edge-py, in process, HNSW): the embedded vector store, the default.

One `EdgeShard` per space, stored as generations under `{vector_dir}/{space name}/`:

    space.json      {"model": ..., "dim": ..., "distance": "cosine" | "dot", "format": 1}
    CURRENT         the name of the live generation (replaced atomically)
    gen-<id>/       an EdgeShard directory (segments/, wal/, edge_config.json)

What qdrant-edge-py 0.9.0 does, measured on 2 cores, and what this module does about it:

- Every call holds the GIL for its whole duration: no other Python thread, the event loop
  included, runs meanwhile. Calls are kept short instead — searches (1–4 ms at 1M points,
  warm), writes in batches of `batch` points (a few ms each), with the event loop free
  between batches. They run on worker threads (one writer thread, so writes apply in call
  order; two reader threads), which costs little and lets a future release that drops the
  GIL run searches side by side. Concurrent searches therefore queue: throughput is one
  core's worth whatever the number of callers.
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
import signal
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
_SCHEMA = {"keyword": qe.PayloadSchemaType.Keyword, "float": qe.PayloadSchemaType.Float}


_DISTANCE = {"cosine": qe.Distance.Cosine, "dot": qe.Distance.Dot}


def edge_config(dim: int, distance: Distance = "cosine") -> qe.EdgeConfig:
    return qe.EdgeConfig(
        vectors=qe.EdgeVectorParams(size=dim, distance=_DISTANCE[distance]),
        hnsw_config=qe.HnswIndexConfig(
            m=HNSW_M,
            ef_construct=HNSW_EF_CONSTRUCT,
            full_scan_threshold=FULL_SCAN_THRESHOLD_KB,
            max_indexing_threads=0,  # all cores: the build runs niced, in a child process
        ),
    )


def to_filter(f: SearchFilter) -> qe.Filter | None:
    must: list[Any] = []
    if f.kind is not None:
        must.append(qe.FieldCondition(key="kind", match=qe.MatchValue(f.kind)))
    if f.spoken_before is not None or f.spoken_after is not None:
        must.append(
            qe.FieldCondition(
                key="spoken_at", range=qe.RangeFloat(gte=f.spoken_after, lt=f.spoken_before)
            )
        )
    if f.session_ids is not None:
        must.append(qe.FieldCondition(key="session_id", match=qe.MatchAny(list(f.session_ids))))
    return qe.Filter(must=must) if must else None


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
    """One open shard directory. Readers hold it while they use it, so that a swap can
    wait for them before it closes the shard."""

    def __init__(self, path: Path, shard: qe.EdgeShard) -> None:
        self.path = path
        self.shard = shard
        self._cond = threading.Condition()
        self._users = 0
        self._retired = False

    @contextlib.contextmanager
    def use(self) -> Iterator[qe.EdgeShard]:
        with self._cond:
            if self._retired:
                raise _Retired
            self._users += 1
        try:
            yield self.shard
        finally:
            with self._cond:
                self._users -= 1
                self._cond.notify_all()

    def retire(self, *, flush: bool) -> None:
        """Refuse new readers, wait for the current ones, close the shard."""
        with self._cond:
            self._retired = True
            self._cond.wait_for(lambda: self._users == 0)
        try:
            if flush:
                self.shard.flush()
        finally:
            self.shard.close()


@dataclass(eq=False)
class _Space:
    name: str
    root: Path
    model: str
    dim: int
    distance: Distance
    gen: _Generation | None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # writes, swaps, drop
    journal: list[qe.UpdateOperation] | None = None  # writes made while a build runs
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
        self._closing = False

    # --- lifecycle ---

    async def open(self) -> None:
        if self._writer is not None:
            return
        await asyncio.to_thread(self.directory.mkdir, parents=True, exist_ok=True)
        self._closing = False
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="vectors-edge-write")
        self._readers = ThreadPoolExecutor(2, thread_name_prefix="vectors-edge-read")
        log.info("vectors.edge.open", directory=str(self.directory))

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
                await self._write(self._close_space, sp)
        self._spaces.clear()
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
            try:
                shard = qe.EdgeShard.create(str(path), edge_config(create.dim, create.distance))
                for field_name, schema in INDEXED_FIELDS.items():
                    shard.update(qe.UpdateOperation.create_field_index(field_name, _SCHEMA[schema]))
                shard.flush()
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
                shard = qe.EdgeShard.load(str(path))
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
            _Generation(path, shard),
        )
        self._refresh(sp)
        return sp

    def _refresh(self, sp: _Space) -> None:
        info = sp.live().shard.info()
        sp.points = info.points_count
        sp.unindexed = max(0, info.points_count - info.indexed_vectors_count)

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

    def _apply(self, sp: _Space, make: Callable[[], qe.UpdateOperation], points: int) -> None:
        """Apply one update to the live shard, and to the journal while a build runs."""
        op = make()
        try:
            sp.live().shard.update(op)
        except Exception as exc:
            raise _edge_error(f"update of vector space {sp.name} failed", exc) from exc
        journal = sp.journal
        if journal is not None:
            journal.append(op)
        sp.dirty += points

    def _after_writes(self, sp: _Space) -> None:
        if sp.gen is None:
            return
        if sp.dirty >= self.flush_after:
            sp.gen.shard.flush()
            sp.dirty = 0
        self._refresh(sp)

    async def upsert(self, space: SpaceName, points: Sequence[VectorPoint]) -> None:
        prepared = prepare(space, points)
        if not prepared:
            return
        sp = await self._space(self.name_of(space))

        def make(chunk: list[Prepared]) -> Callable[[], qe.UpdateOperation]:
            return lambda: qe.UpdateOperation.upsert_points(
                [qe.Point(p.id, p.vector, p.payload) for p in chunk]
            )

        async with sp.lock:
            for i in range(0, len(prepared), self.batch):
                chunk = prepared[i : i + self.batch]
                await self._write(self._apply, sp, make(chunk), len(chunk))
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
                await self._write(
                    self._apply, sp, lambda c=chunk: qe.UpdateOperation.delete_points(c), len(chunk)
                )
            await self._write(self._after_writes, sp)

    async def delete_session(self, space: SpaceName, session_id: str) -> None:
        sp = await self._space(self.name_of(space))
        flt = to_filter(SearchFilter(session_ids=(session_id,)))
        assert flt is not None
        async with sp.lock:
            await self._write(
                self._apply, sp, lambda: qe.UpdateOperation.delete_points_by_filter(flt), 1
            )
            await self._write(self._after_writes, sp)

    # --- reads ---

    def _with_live(self, sp: _Space, fn: Callable[[qe.EdgeShard], T]) -> T:
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
        request = qe.QueryRequest(
            limit=limit,
            query=qe.Query.Nearest(query),
            filter=to_filter(flt),
            with_payload=True,
            params=qe.SearchParams(hnsw_ef=self.search_ef),
        )

        def run(shard: qe.EdgeShard) -> list[VectorHit]:
            try:
                found = shard.query(request)
            except Exception as exc:
                raise _edge_error(f"search of vector space {sp.name} failed", exc) from exc
            return [VectorHit(str(p.id), float(p.score), dict(p.payload or {})) for p in found]

        return await self._read(self._with_live, sp, run)

    async def count(self, space: SpaceName) -> int:
        sp = await self._space(self.name_of(space))
        return await self._read(
            self._with_live, sp, lambda shard: shard.count(qe.CountRequest(exact=True))
        )

    async def segment_points(self, space: SpaceName | str) -> list[SegmentPointKey]:
        sp = await self._space(self.name_of(space))
        out: list[SegmentPointKey] = []
        offset: Any = None
        while True:
            request = qe.ScrollRequest(
                offset=offset,
                limit=SCAN_PAGE,
                with_payload=["kind", "session_id", "segment_id"],
                with_vector=False,
            )
            records, offset = await self._read(
                self._with_live, sp, lambda shard, r=request: shard.scroll(r)
            )
            out.extend(k for rec in records if (k := segment_key(rec.id, rec.payload)))
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
        gen.shard.flush()
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
        try:
            shard = qe.EdgeShard.load(str(new_path))
        except Exception as exc:
            raise _edge_error(f"cannot load the built index of {sp.name}", exc) from exc
        try:
            for op in sp.journal or ():
                shard.update(op)
            _write_atomically(sp.root / CURRENT, new_path.name + "\n")
        except Exception as exc:
            shard.close()
            if isinstance(exc, OSError):
                raise
            raise _edge_error(f"cannot replay writes into the index of {sp.name}", exc) from exc
        sp.gen, sp.journal = _Generation(new_path, shard), None
        old.retire(flush=False)
        shutil.rmtree(old.path, ignore_errors=True)
        self._refresh(sp)
        sp.build_floor = sp.unindexed

    def _discard(self, sp: _Space) -> None:
        """Forget a build that did not complete: its journal and its copy (writer thread)."""
        sp.journal = None
        live = sp.gen.path if sp.gen is not None else None
        for path in sp.root.glob(f"{GEN_PREFIX}*"):
            if path != live:
                shutil.rmtree(path, ignore_errors=True)


# --- the index builder (child process) ---------------------------------------------------


def _die_with_parent(parent: int) -> None:
    """Linux: get SIGKILL when the parent dies, so no orphan writes into a generation."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != parent:
        sys.exit(3)


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
    _die_with_parent(int(argv[2]))
    with contextlib.suppress(OSError):
        os.nice(10)  # the serving process keeps the cores it needs
    build(argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
