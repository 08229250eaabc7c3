"""The consolidation: communities, then every entity's tier and salience as of a time.

Run nightly by a procrastinate periodic task (jobs.py; `consolidation_time` in `timezone`) and
on demand by `POST /v1/consolidate`. Entities are read in id order in batches of
`consolidation_batch`; each batch is one transaction (tiers, salience, history rows, the run's
progress) followed by one progress event, so a run over 100k entities holds one batch in
memory and a crash loses at most one batch of work (the next run redoes it: the result depends
only on the data and `as_of`).

Idempotent and safe to overlap: a session-level advisory lock lets one run work at a time (the
job queue also gives every consolidation job the same procrastinate lock); a second run waits
for the first; running again with the same data and `as_of` changes nothing and writes no
history. The scheduled run is once per local night (`consolidation_runs.night` is unique).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from context_engine.config import Settings
from context_engine.memory import daily, promises
from context_engine.memory.communities import detect_communities
from context_engine.memory.tiers import TIERS, EntityHistory, TierPolicy, classify_tier
from context_engine.observe.recorder import EventRecorder
from context_engine.store.models import ConsolidationRun
from her_os_shared.creatures import CreatureName
from her_os_shared.events import EventType
from her_os_shared.logging import get_logger

if TYPE_CHECKING:
    from context_engine.graph import KnowledgeGraph

log = get_logger(__name__)

# pg_advisory_lock key of the consolidation ("her-os" + 1): one run at a time per database.
LOCK_KEY = 0x6865722D6F7301
# Tier changes listed in one progress event (the rest are counted).
EVENT_CHANGES = 50

_RANK = {tier: i for i, tier in enumerate(TIERS)}

_BATCH = text(
    """
    SELECT id, type, name, first_seen, last_seen, episode_count, contradicted_at,
           community_id IS NOT NULL AS in_community, tier, salience, low_salience, contradicted
    FROM entities
    WHERE id > :after AND first_seen <= :as_of
    ORDER BY id LIMIT :batch
    """
)
_UPDATE = text(
    """
    UPDATE entities e
    SET tier = u.tier, salience = u.salience, low_salience = u.low, contradicted = u.contra,
        tier_changed_at = CASE WHEN e.tier <> u.tier THEN :as_of ELSE e.tier_changed_at END,
        consolidated_at = :as_of
    FROM unnest(CAST(:ids AS bigint[]), CAST(:tiers AS text[]), CAST(:saliences AS float8[]),
                CAST(:lows AS boolean[]), CAST(:contras AS boolean[]))
         AS u(id, tier, salience, low, contra)
    WHERE e.id = u.id
    """
)
_HISTORY = text(
    """
    INSERT INTO entity_tier_history (entity_id, from_tier, to_tier, reason, changed_at, run_id)
    SELECT u.id, u.from_tier, u.to_tier, u.reason, :as_of, :run_id
    FROM unnest(CAST(:ids AS bigint[]), CAST(:froms AS text[]), CAST(:tos AS text[]),
                CAST(:reasons AS text[])) AS u(id, from_tier, to_tier, reason)
    """
)
_RUNS = ConsolidationRun.__table__


@dataclass(frozen=True, slots=True)
class RunCounts:
    processed: int = 0
    promoted: int = 0
    demoted: int = 0
    low_salience: int = 0


async def get_run(conn: AsyncConnection, run_id: int) -> dict[str, Any] | None:
    row = (await conn.execute(select(_RUNS).where(_RUNS.c.id == run_id))).first()
    return dict(row._mapping) if row else None


async def list_runs(conn: AsyncConnection, *, limit: int, offset: int) -> list[dict[str, Any]]:
    rows = await conn.execute(select(_RUNS).order_by(_RUNS.c.id.desc()).limit(limit).offset(offset))
    return [dict(r._mapping) for r in rows]


async def create_run(
    conn: AsyncConnection, *, trigger: str, as_of: datetime, night: str | None = None
) -> int | None:
    """A new run row, `queued`. For a night that already has a run: None, unless that run
    failed (then it is queued again: a retried nightly job)."""
    row = (
        await conn.execute(
            text(
                """
                INSERT INTO consolidation_runs (trigger, night, as_of, status)
                VALUES (:trigger, :night, :as_of, 'queued')
                ON CONFLICT (night) DO UPDATE
                    SET status = 'queued', as_of = EXCLUDED.as_of, error = NULL,
                        started_at = now(), finished_at = NULL, processed = 0
                    WHERE consolidation_runs.status = 'failed'
                RETURNING id
                """
            ),
            {"trigger": trigger, "night": night, "as_of": as_of},
        )
    ).first()
    return int(row[0]) if row else None


class Consolidator:
    def __init__(
        self,
        engine: AsyncEngine,
        settings: Settings,
        recorder: EventRecorder | None = None,
        graph: KnowledgeGraph | None = None,
        reflector: daily.DailyReflector | None = None,
    ) -> None:
        self.engine = engine
        self.settings = settings
        self.recorder = recorder
        self.graph = graph
        # the night's reflection: the runtime's (its LLM, its ingestor), else one without an
        # LLM whose file the watcher ingests
        self.reflector = reflector or daily.DailyReflector(
            engine, settings, recorder=recorder, graph=graph
        )
        self.policy = TierPolicy.from_settings(settings)

    async def _emit(self, creature: str, event_type: EventType, **kwargs: Any) -> None:
        if self.recorder is not None:
            await self.recorder.emit(creature, event_type, **kwargs)

    async def run(self, run_id: int) -> dict[str, Any]:
        """Carry out the queued run `run_id` (its as_of is in the row) and return the row.
        Waits while another run holds the lock."""
        async with self.engine.connect() as lock_conn:
            # Session-level lock on a connection held for the whole run: released by
            # pg_advisory_unlock, or by PostgreSQL if this process dies mid-run.
            await lock_conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": LOCK_KEY})
            await lock_conn.commit()
            try:
                return await self._run_locked(run_id)
            finally:
                await lock_conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": LOCK_KEY})
                await lock_conn.commit()

    async def _run_locked(self, run_id: int) -> dict[str, Any]:
        async with self.engine.begin() as conn:
            # Under the lock no other run is working: a row still `running` was interrupted.
            await conn.execute(
                text(
                    "UPDATE consolidation_runs SET status = 'failed', finished_at = now(), "
                    "error = 'interrupted (the engine stopped during the run)' "
                    "WHERE status = 'running' AND id <> :id"
                ),
                {"id": run_id},
            )
            run = await get_run(conn, run_id)
            if run is None:
                raise LookupError(f"no consolidation run {run_id}")
            if run["status"] == "done":
                return run  # a job re-delivered after it finished
            as_of: datetime = run["as_of"]
            total = (
                await conn.execute(
                    text("SELECT count(*) FROM entities WHERE first_seen <= :as_of"),
                    {"as_of": as_of},
                )
            ).scalar_one()
            await conn.execute(
                text(
                    "UPDATE consolidation_runs SET status = 'running', started_at = now(), "
                    "entities_total = :total, processed = 0, promoted = 0, demoted = 0, "
                    "low_salience = 0, error = NULL WHERE id = :id"
                ),
                {"id": run_id, "total": total},
            )
        log.info("consolidation.start", run_id=run_id, as_of=as_of.isoformat(), entities=total)
        await self._emit(
            CreatureName.SALMON,
            EventType.START,
            data={"run_id": run_id, "as_of": as_of.isoformat(), "entities": total},
            reasoning=f"{run['trigger']} consolidation of {total} entities as of {as_of:%Y-%m-%d}",
        )
        try:
            communities = await self._communities(as_of)
            counts = await self._tiers(run_id, as_of, total)
            kept = await promises.update_fulfilments(
                self.engine, as_of=as_of, recorder=self.recorder
            )
        except Exception as exc:
            async with self.engine.begin() as conn:
                await conn.execute(
                    text(
                        "UPDATE consolidation_runs SET status = 'failed', finished_at = now(), "
                        "error = :error WHERE id = :id"
                    ),
                    {"id": run_id, "error": repr(exc)[:2000]},
                )
            log.error("consolidation.failed", run_id=run_id, error=repr(exc)[:500])
            await self._emit(
                CreatureName.SALMON,
                EventType.ERROR,
                data={"run_id": run_id, "error": repr(exc)[:300]},
            )
            raise
        async with self.engine.begin() as conn:
            await conn.execute(
                text(
                    "UPDATE consolidation_runs SET status = 'done', finished_at = now(), "
                    "communities = :communities WHERE id = :id"
                ),
                {"id": run_id, "communities": communities},
            )
            done = await get_run(conn, run_id)
        assert done is not None
        if run["trigger"] == "schedule":
            await self._reflect_on_yesterday(as_of)
        log.info("consolidation.done", run_id=run_id, processed=counts.processed,
                 promoted=counts.promoted, demoted=counts.demoted, promises_kept=kept,
                 low_salience=counts.low_salience, communities=communities)  # fmt: skip
        await self._emit(
            CreatureName.SALMON,
            EventType.COMPLETE,
            data={
                "run_id": run_id,
                "processed": counts.processed,
                "promoted": counts.promoted,
                "demoted": counts.demoted,
                "low_salience": counts.low_salience,
                "communities": communities,
                "promises_kept": kept,
            },
            reasoning=(
                f"{counts.promoted} promoted, {counts.demoted} demoted, "
                f"{counts.low_salience} faded below the salience threshold"
            ),
        )
        return done

    async def _reflect_on_yesterday(self, as_of: datetime) -> None:
        """The night's reflection on the day that just ended. Its failure leaves the
        consolidation done: GET /v1/daily makes the reflection on demand anyway."""
        yesterday = daily.local_today(self.settings.timezone, as_of) - timedelta(days=1)
        try:
            await self.reflector.reflect(yesterday, now=as_of)
        except Exception as exc:
            log.error("consolidation.reflection_failed", day=yesterday.isoformat(),
                      error=repr(exc)[:500])  # fmt: skip

    async def _communities(self, as_of: datetime) -> int:
        await self._emit(CreatureName.CORAL, EventType.START, data={"as_of": as_of.isoformat()})
        outcome = await detect_communities(
            self.engine, self.settings, as_of=as_of, graph=self.graph
        )
        if outcome.graph_error:
            # PostgreSQL's communities stand (tiers use them); the graph copy is retried next run.
            await self._emit(
                CreatureName.CORAL, EventType.ERROR, data={"graph_error": outcome.graph_error[:300]}
            )
        await self._emit(
            CreatureName.CORAL,
            EventType.COMPLETE,
            data={"communities": outcome.communities, "members": outcome.members},
            reasoning=f"{outcome.communities} communities of {outcome.members} entities",
        )
        return outcome.communities

    async def _tiers(self, run_id: int, as_of: datetime, total: int) -> RunCounts:
        after = 0
        counts = RunCounts()
        while True:
            async with self.engine.begin() as conn:
                rows = (
                    await conn.execute(
                        _BATCH,
                        {
                            "after": after,
                            "as_of": as_of,
                            "batch": self.settings.consolidation_batch,
                        },
                    )
                ).all()
                if not rows:
                    break
                after = rows[-1].id
                batch, changes = self._classify(rows, as_of)
                await conn.execute(_UPDATE, {"as_of": as_of, **batch})
                if changes:
                    await conn.execute(
                        _HISTORY,
                        {
                            "as_of": as_of,
                            "run_id": run_id,
                            "ids": [c["id"] for c in changes],
                            "froms": [c["from"] for c in changes],
                            "tos": [c["to"] for c in changes],
                            "reasons": [c["reason"] for c in changes],
                        },
                    )
                promoted = sum(_RANK[c["to"]] > _RANK[c["from"]] for c in changes)
                counts = RunCounts(
                    processed=counts.processed + len(rows),
                    promoted=counts.promoted + promoted,
                    demoted=counts.demoted + len(changes) - promoted,
                    low_salience=counts.low_salience + sum(batch["lows"]),
                )
                await conn.execute(
                    text(
                        "UPDATE consolidation_runs SET processed = :processed, "
                        "promoted = :promoted, demoted = :demoted, low_salience = :low "
                        "WHERE id = :id"
                    ),
                    {
                        "id": run_id,
                        "processed": counts.processed,
                        "promoted": counts.promoted,
                        "demoted": counts.demoted,
                        "low": counts.low_salience,
                    },
                )
            await self._emit(
                CreatureName.SEA_CUCUMBER,
                EventType.METRIC,
                data={
                    "run_id": run_id,
                    "processed": counts.processed,
                    "total": total,
                    "low_salience": counts.low_salience,
                },
            )
            if changes:
                await self._emit(
                    CreatureName.SALMON,
                    EventType.METRIC,
                    data={"run_id": run_id, "changes": changes[:EVENT_CHANGES],
                          "changes_total": len(changes)},
                    reasoning="; ".join(
                        f"{c['name']} {c['from']}→{c['to']}" for c in changes[:5]
                    ),
                )  # fmt: skip
            await asyncio.sleep(0)  # let queries in between batches
        return counts

    def _classify(
        self, rows: list[Any], as_of: datetime
    ) -> tuple[dict[str, list[Any]], list[dict[str, Any]]]:
        batch: dict[str, list[Any]] = {
            "ids": [], "tiers": [], "saliences": [], "lows": [], "contras": []
        }  # fmt: skip
        changes: list[dict[str, Any]] = []
        for r in rows:
            state = classify_tier(
                EntityHistory(
                    type=r.type,
                    first_seen=r.first_seen,
                    last_seen=r.last_seen,
                    episode_count=r.episode_count,
                    contradicted_at=r.contradicted_at,
                    in_community=r.in_community,
                    tier=r.tier if r.tier in _RANK else "L0",
                ),
                as_of,
                self.policy,
            )
            batch["ids"].append(r.id)
            batch["tiers"].append(state.tier)
            batch["saliences"].append(state.salience)
            batch["lows"].append(state.low_salience)
            batch["contras"].append(state.contradicted)
            if state.tier != r.tier:
                changes.append(
                    {"id": r.id, "name": r.name, "type": r.type, "from": r.tier,
                     "to": state.tier, "reason": state.reason}
                )  # fmt: skip
        return batch, changes


async def run_now(
    engine: AsyncEngine, consolidator: Consolidator, *, as_of: datetime | None = None
) -> dict[str, Any]:
    """Create a run and carry it out in this process (tests, benchmarks, the CLI)."""
    async with engine.begin() as conn:
        run_id = await create_run(conn, trigger="api", as_of=as_of or datetime.now(UTC))
    assert run_id is not None  # only nightly runs can collide
    return await consolidator.run(run_id)


_STATS = text(
    """
    SELECT tier, type, count(*) AS n, count(*) FILTER (WHERE low_salience) AS low,
           count(*) FILTER (WHERE contradicted) AS contra, avg(salience) AS salience
    FROM entities WHERE episode_count > 0
    GROUP BY tier, type
    """
)
_RECENT = text(
    """
    SELECT h.entity_id, e.name, e.type, h.from_tier, h.to_tier, h.reason, h.changed_at,
           h.run_id
    FROM entity_tier_history h JOIN entities e ON e.id = h.entity_id
    ORDER BY h.id DESC LIMIT :limit
    """
)


async def tier_stats(conn: AsyncConnection, *, recent: int = 20) -> dict[str, Any]:
    """What the dashboard's memory zone draws: entities per tier (and per type), faded and
    contradicted counts, mean salience, communities, the last run, the latest tier changes.
    Entities only older extractor versions mentioned (history) are left out."""
    per_tier = {t: {"count": 0, "low_salience": 0, "contradicted": 0, "salience_sum": 0.0}
                for t in TIERS}  # fmt: skip
    by_type: dict[str, dict[str, int]] = {}
    for r in await conn.execute(_STATS):
        tier = r.tier if r.tier in per_tier else "L0"
        agg = per_tier[tier]
        agg["count"] += r.n
        agg["low_salience"] += r.low
        agg["contradicted"] += r.contra
        agg["salience_sum"] += float(r.salience or 0.0) * r.n
        by_type.setdefault(r.type, dict.fromkeys(TIERS, 0))[tier] += r.n
    tiers = {
        t: {
            "count": a["count"],
            "low_salience": a["low_salience"],
            "contradicted": a["contradicted"],
            "mean_salience": round(a["salience_sum"] / a["count"], 4) if a["count"] else None,
        }
        for t, a in per_tier.items()
    }
    communities = (await conn.execute(text("SELECT count(*) FROM communities"))).scalar_one()
    last = (
        await conn.execute(
            select(_RUNS).where(_RUNS.c.status == "done").order_by(_RUNS.c.id.desc()).limit(1)
        )
    ).first()
    changes = [dict(r._mapping) for r in await conn.execute(_RECENT, {"limit": recent})]
    return {
        "total": sum(a["count"] for a in tiers.values()),
        "tiers": tiers,
        "by_type": by_type,
        "communities": int(communities),
        "last_run": dict(last._mapping) if last else None,
        "recent_changes": changes,
    }
