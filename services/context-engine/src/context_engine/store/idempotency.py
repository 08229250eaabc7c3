"""The idempotency records (her_os_shared.idempotency) in PostgreSQL, table
`idempotency_keys` (migration 0016): each step one statement on the main pool, the claim an
`INSERT … ON CONFLICT DO UPDATE … WHERE` so two requests racing for a key cannot both win."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, or_, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from context_engine.store.models import IdempotencyKey
from her_os_shared.idempotency import Record

T = IdempotencyKey


class PgIdempotencyStore:
    """`IdempotencyStore` on the engine's PostgreSQL."""

    def __init__(self, db: AsyncEngine) -> None:
        self.db = db

    async def claim(
        self, scope: str, key: str, record: Record, *, replace_before: datetime,
        abandoned_before: datetime,
    ) -> Record | None:  # fmt: skip
        new = insert(T).values(
            scope=scope, key=key, fingerprint=record.fingerprint, owner=record.owner,
            created_at=record.created_at,
        )  # fmt: skip
        claim = new.on_conflict_do_update(
            index_elements=[T.scope, T.key],
            set_={
                "fingerprint": new.excluded.fingerprint,
                "owner": new.excluded.owner,
                "created_at": new.excluded.created_at,
                "status": None,
                "body": None,
            },
            # an expired record, or a claim whose process died before answering
            where=or_(
                T.created_at < replace_before,
                T.status.is_(None) & (T.created_at < abandoned_before),
            ),
        ).returning(T.owner)
        found = select(T.fingerprint, T.owner, T.created_at, T.status, T.body).where(
            T.scope == scope, T.key == key
        )
        async with self.db.begin() as conn:
            if (await conn.execute(claim)).first() is not None:
                return None
            row = (await conn.execute(found)).first()
        if row is None:  # released or purged in between: the caller claims again
            return Record(record.fingerprint, "", record.created_at)
        return Record(*row)

    async def finish(self, scope: str, key: str, owner: str, status: int, body: bytes) -> None:
        async with self.db.begin() as conn:
            await conn.execute(
                update(T)
                .where(T.scope == scope, T.key == key, T.owner == owner)
                .values(status=status, body=body)
            )

    async def release(self, scope: str, key: str, owner: str) -> None:
        async with self.db.begin() as conn:
            await conn.execute(
                delete(T).where(
                    T.scope == scope, T.key == key, T.owner == owner, T.status.is_(None)
                )
            )

    async def purge(self, before: datetime) -> int:
        async with self.db.begin() as conn:
            result = await conn.execute(delete(T).where(T.created_at < before))
        return result.rowcount or 0
