"""The process that holds the Qdrant Edge shards (`python -m context_engine.vectors.edge_host`).

qdrant-edge-py holds the GIL for the whole of every call: a search at 1M points held it about
4 ms, during which the engine's event loop and every other thread stood still (py-spy, 8
clients: docs/benchmarks.md). In a process of its own, a search costs the engine a message
each way (pickled arguments and hits, a fraction of a millisecond in a thread that waits with
the GIL released) and the shard's work runs on the other core beside the event loop.

The engine talks to it over a socket pair with `multiprocessing.connection` framing: one
request, one answer, in order. The host opens shards by path and applies what it is sent —
every decision (generations, journals, builds, swaps) stays in vectors/edge.py. A host dies
with its engine (a parent-death signal), and one that exits is started again by the store,
which then reloads its spaces from disk (the shards' write-ahead logs replay what was
acknowledged).

Messages are plain data: `(op, args)` in, `(True, value)` or `(False, "Type: message")` out.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any

import qdrant_edge as qe

from context_engine.vectors.base import SearchFilter, VectorStoreError
from her_os_shared.children import die_with_parent
from her_os_shared.logging import get_logger

log = get_logger(__name__)

# One update applied to a shard, as plain data (kept in a build's journal and replayed):
# ("upsert", [(id, vector, payload), ...]), ("delete", [id, ...]), ("delete_filter", filter).
Update = tuple[str, Any]
# (points_count, indexed_vectors_count)
Info = tuple[int, int]

_SCHEMA = {"keyword": qe.PayloadSchemaType.Keyword, "float": qe.PayloadSchemaType.Float}
_DISTANCE = {"cosine": qe.Distance.Cosine, "dot": qe.Distance.Dot}


class HostCallError(RuntimeError):
    """The host ran the call and it failed: the shard's own error, as text."""


# --- the host (child process) ---------------------------------------------------------------


def edge_config(
    dim: int, distance: str, m: int, ef_construct: int, full_scan_kb: int
) -> qe.EdgeConfig:
    return qe.EdgeConfig(
        vectors=qe.EdgeVectorParams(size=dim, distance=_DISTANCE[distance]),
        hnsw_config=qe.HnswIndexConfig(
            m=m,
            ef_construct=ef_construct,
            full_scan_threshold=full_scan_kb,
            max_indexing_threads=0,  # all cores: builds run niced, in a child process
        ),
    )


def to_filter(f: SearchFilter | None) -> qe.Filter | None:
    if f is None:
        return None
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


def to_operation(update: Update) -> qe.UpdateOperation:
    kind, arg = update
    if kind == "upsert":
        return qe.UpdateOperation.upsert_points([qe.Point(i, v, p) for i, v, p in arg])
    if kind == "delete":
        return qe.UpdateOperation.delete_points(list(arg))
    if kind == "delete_filter":
        flt = to_filter(arg)
        if flt is None:
            raise ValueError("delete_filter needs a filter")
        return qe.UpdateOperation.delete_points_by_filter(flt)
    raise ValueError(f"unknown update {kind!r}")


class _Host:
    def __init__(self) -> None:
        self.shards: dict[str, qe.EdgeShard] = {}

    def shard(self, path: str) -> qe.EdgeShard:
        try:
            return self.shards[path]
        except KeyError:
            raise ValueError(f"no shard open at {path}") from None

    def create(
        self, path: str, config: tuple[int, str, int, int, int], indexed: dict[str, str]
    ) -> Info:
        shard = qe.EdgeShard.create(path, edge_config(*config))
        try:
            for field_name, schema in indexed.items():
                shard.update(qe.UpdateOperation.create_field_index(field_name, _SCHEMA[schema]))
            shard.flush()
        except BaseException:
            shard.close()
            raise
        self.shards[path] = shard
        return self.info(path)

    def load(self, path: str) -> Info:
        if path in self.shards:
            raise ValueError(f"a shard is already open at {path}")
        self.shards[path] = qe.EdgeShard.load(path)
        return self.info(path)

    def info(self, path: str) -> Info:
        info = self.shard(path).info()
        return int(info.points_count), int(info.indexed_vectors_count)

    def update(self, path: str, updates: Sequence[Update]) -> Info:
        shard = self.shard(path)
        for update in updates:
            shard.update(to_operation(update))
        return self.info(path)

    def query(
        self, path: str, vector: list[float], limit: int, flt: SearchFilter | None, ef: int
    ) -> list[tuple[str, float, dict[str, Any]]]:
        request = qe.QueryRequest(
            limit=limit,
            query=qe.Query.Nearest(vector),
            filter=to_filter(flt),
            with_payload=True,
            params=qe.SearchParams(hnsw_ef=ef),
        )
        found = self.shard(path).query(request)
        return [(str(p.id), float(p.score), dict(p.payload or {})) for p in found]

    def count(self, path: str) -> int:
        return int(self.shard(path).count(qe.CountRequest(exact=True)))

    def scroll(
        self, path: str, offset: Any, limit: int, fields: list[str]
    ) -> tuple[list[tuple[str, dict[str, Any]]], Any]:
        request = qe.ScrollRequest(
            offset=offset, limit=limit, with_payload=fields, with_vector=False
        )
        records, after = self.shard(path).scroll(request)
        return [(str(r.id), dict(r.payload or {})) for r in records], after

    def flush(self, path: str) -> None:
        self.shard(path).flush()

    def close(self, path: str, flush: bool) -> None:
        shard = self.shards.pop(path, None)
        if shard is None:
            return
        try:
            if flush:
                shard.flush()
        finally:
            shard.close()

    def close_all(self) -> None:
        for path in list(self.shards):
            with contextlib.suppress(Exception):
                self.close(path, True)


def serve(conn: Connection) -> None:
    """Answer requests until the engine says "exit" or goes away; then close every shard."""
    host = _Host()
    try:
        while True:
            try:
                op, args = conn.recv()
            except (EOFError, OSError):
                return
            if op == "exit":
                host.close_all()
                conn.send((True, None))
                return
            try:
                conn.send((True, getattr(host, op)(*args)))
            except Exception as exc:  # the shard's error goes back as text
                conn.send((False, f"{type(exc).__name__}: {exc}"))
    finally:
        host.close_all()


def main(argv: Sequence[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m context_engine.vectors.edge_host SOCKET_FD PARENT_PID")
        return 2
    die_with_parent(int(argv[1]))
    serve(Connection(int(argv[0])))
    return 0


# --- the engine's side ------------------------------------------------------------------------


class ShardHost:
    """The engine's handle on its host process: `call(op, *args)` from any thread (one call
    at a time: the host serves them in order anyway). A host that went away is reported as
    VectorStoreError; `alive` tells the store to start another."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conn: Connection | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def alive(self) -> bool:
        return self._conn is not None and self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self) -> None:
        """Start the host process (blocking: a thread, not the event loop)."""
        with self._lock:
            self._stop_locked(wait=False)
            ours, theirs = socket.socketpair()
            try:
                self._proc = subprocess.Popen(  # noqa: S603 (our interpreter, no shell)
                    [sys.executable, "-m", "context_engine.vectors.edge_host",
                     str(theirs.fileno()), str(os.getpid())],
                    pass_fds=[theirs.fileno()],
                    stdin=subprocess.DEVNULL,
                )  # fmt: skip
            finally:
                theirs.close()
            self._conn = Connection(ours.detach())
            self.starts += 1
        log.info("vectors.edge.host_started", pid=self._proc.pid)

    def call(self, op: str, *args: Any) -> Any:
        with self._lock:
            conn = self._conn
            if conn is None:
                raise VectorStoreError("the vector host process is not running")
            try:
                conn.send((op, args))
                ok, value = conn.recv()
            except (EOFError, OSError) as exc:
                code = self._proc.poll() if self._proc is not None else None
                self._stop_locked(wait=False)
                raise VectorStoreError(
                    f"the vector host process went away during {op} (exit code {code}): "
                    f"{type(exc).__name__}"
                ) from exc
        if not ok:
            raise HostCallError(value)
        return value

    def stop(self) -> None:
        """Close every shard (flushed) and end the host."""
        with self._lock:
            conn = self._conn
            if conn is not None:
                with contextlib.suppress(EOFError, OSError):
                    conn.send(("exit", ()))
                    conn.recv()
            self._stop_locked(wait=True)

    def _stop_locked(self, *, wait: bool) -> None:
        conn, proc, self._conn, self._proc = self._conn, self._proc, None, None
        if conn is not None:
            conn.close()
        if proc is not None:
            try:
                proc.wait(timeout=30 if wait else 0.1)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
