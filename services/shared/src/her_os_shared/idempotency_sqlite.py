"""The idempotency records (idempotency.py) in a SQLite file, for a service without a
database (the audio pipeline's wearable webhooks): the standard library's sqlite3, WAL with
full sync, so a kept answer survives a crash or a restart. Each step opens its own short
connection in a thread (the event loop never waits on the disk) inside one transaction."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from her_os_shared.idempotency import Record

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS idempotency_keys (
    scope TEXT NOT NULL,
    key TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    owner TEXT NOT NULL,
    created_at REAL NOT NULL,
    status INTEGER,
    body BLOB,
    PRIMARY KEY (scope, key)
);
CREATE INDEX IF NOT EXISTS ix_idempotency_keys_created_at ON idempotency_keys (created_at);
"""
BUSY_TIMEOUT_S = 10.0


def _ts(when: datetime) -> float:
    return when.timestamp()


def _record(row: tuple[str, str, float, int | None, bytes | None] | None) -> Record | None:
    if row is None:
        return None
    fp, owner, created, status, body = row
    return Record(fp, owner, datetime.fromtimestamp(created, UTC), status, body)


class SqliteIdempotencyStore:
    """`IdempotencyStore` on a SQLite file (created with its folder on first use)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._ready = False

    def _connect(self) -> sqlite3.Connection:
        if not self._ready:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        conn.execute("PRAGMA synchronous=FULL")
        if not self._ready:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(SCHEMA)
            self._ready = True
        return conn

    async def _run(self, step: Callable[[sqlite3.Connection], T]) -> T:
        def call() -> T:
            conn = self._connect()
            try:
                conn.execute("BEGIN IMMEDIATE")  # one writer at a time: the step is atomic
                try:
                    result = step(conn)
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
                return result
            finally:
                conn.close()

        return await asyncio.to_thread(call)

    async def claim(
        self, scope: str, key: str, record: Record, *, replace_before: datetime,
        abandoned_before: datetime,
    ) -> Record | None:  # fmt: skip
        def step(conn: sqlite3.Connection) -> Record | None:
            claimed = conn.execute(
                "INSERT INTO idempotency_keys (scope, key, fingerprint, owner, created_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (scope, key) DO UPDATE SET "
                "fingerprint = excluded.fingerprint, owner = excluded.owner, "
                "created_at = excluded.created_at, status = NULL, body = NULL "
                "WHERE idempotency_keys.created_at < ? "
                "OR (idempotency_keys.status IS NULL AND idempotency_keys.created_at < ?) "
                "RETURNING owner",
                (scope, key, record.fingerprint, record.owner, _ts(record.created_at),
                 _ts(replace_before), _ts(abandoned_before)),
            ).fetchone()  # fmt: skip
            if claimed is not None:
                return None
            return _record(
                conn.execute(
                    "SELECT fingerprint, owner, created_at, status, body FROM idempotency_keys "
                    "WHERE scope = ? AND key = ?",
                    (scope, key),
                ).fetchone()
            )

        return await self._run(step)

    async def finish(self, scope: str, key: str, owner: str, status: int, body: bytes) -> None:
        await self._run(
            lambda conn: conn.execute(
                "UPDATE idempotency_keys SET status = ?, body = ? "
                "WHERE scope = ? AND key = ? AND owner = ?",
                (status, body, scope, key, owner),
            )
        )

    async def release(self, scope: str, key: str, owner: str) -> None:
        await self._run(
            lambda conn: conn.execute(
                "DELETE FROM idempotency_keys WHERE scope = ? AND key = ? AND owner = ? "
                "AND status IS NULL",
                (scope, key, owner),
            )
        )

    async def purge(self, before: datetime) -> int:
        return await self._run(
            lambda conn: (
                conn.execute(
                    "DELETE FROM idempotency_keys WHERE created_at < ?", (_ts(before),)
                ).rowcount
            )
        )
