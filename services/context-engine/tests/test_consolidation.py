"""The consolidation through the real engine (fast extractor, real FalkorDB, no LLM), with a
controllable clock: the seed's "coffee, Day 0 to Day 120" story — promotion to L1 on day 8,
Koramangala to L2 on day 91, a contradiction on day 95, the day-120 table — plus the run's
API, idempotency, the nightly tick in local time, and the tier filter of /v1/context."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from engine_harness import (
    Engine,
    eventually,
    ingest,
    query,
    start_graph_engine,
    write_conversation,
)
from sqlalchemy import text

from context_engine.config import Settings

pytestmark = pytest.mark.platform

DAY0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def day(n: float) -> datetime:
    return DAY0 + timedelta(days=n)


@pytest.fixture
def engine(graph_engine: Engine) -> Engine:
    return graph_engine


async def say(
    engine: Engine, session_id: str, when: float | datetime, lines: list[tuple[str, str]]
) -> None:
    """A session spoken on day `when` (or at that time), through the JSONL volume, extracted
    and in the graph."""
    at = when if isinstance(when, datetime) else day(when)
    write_conversation(engine.runtime.settings.transcripts_dir, session_id, at, lines)
    await ingest(engine, session_id)

    async def graphed() -> bool | None:
        rows = await query(
            engine,
            "SELECT status FROM session_stages WHERE session_id = :s AND stage = 'graph'",
            s=session_id,
        )
        return True if rows and rows[0]["status"] == "done" else None

    await eventually(graphed, f"the graph stage of {session_id}")


async def consolidate(engine: Engine, n: float) -> dict[str, Any]:
    r = await engine.post("/v1/consolidate", as_of=day(n).isoformat(), wait="true")
    assert r.status_code == 200, r.text
    run = r.json()
    assert run["status"] == "done", run
    return run


async def tiers(engine: Engine) -> dict[str, tuple[str, bool]]:
    rows = await query(
        engine, "SELECT name, tier, low_salience FROM entities WHERE type IN ('person', 'place')"
    )
    return {r["name"]: (r["tier"], r["low_salience"]) for r in rows}


async def history(engine: Engine, name: str) -> list[tuple[str, str, datetime]]:
    rows = await query(
        engine,
        "SELECT h.from_tier, h.to_tier, h.changed_at FROM entity_tier_history h"
        " JOIN entities e ON e.id = h.entity_id WHERE e.name = :n ORDER BY h.id",
        n=name,
    )
    return [(r["from_tier"], r["to_tier"], r["changed_at"]) for r in rows]


MORNING = [
    ("Asha", "Priya, I love coffee. We have coffee in Koramangala every morning."),
    ("Priya", "Yes Asha, the cafe in Koramangala is our favourite place."),
]
AGAIN = [
    ("Asha", "Hey Priya, coffee in Koramangala again tomorrow?"),
    ("Priya", "Sure Asha, see you in Koramangala."),
]


async def test_coffee_from_day_0_to_day_120(engine: Engine) -> None:
    await say(engine, "d000", 0, [*MORNING, ("Asha", "I will visit the Bangalore Book Fair.")])
    await say(engine, "d002", 2, AGAIN)
    await say(engine, "d004", 4, AGAIN)

    # Day 7 - a moment: too young for L1 whatever the episodes.
    await consolidate(engine, 6.9)
    assert await tiers(engine) == {
        "Asha": ("L0", False), "Priya": ("L0", False), "Koramangala": ("L0", False)
    }  # fmt: skip

    # Day 8: a week old and seen in three sessions: validated facts.
    run = await consolidate(engine, 8)
    # the three people and places, and the topic "coffee" (liked on day 0, said again since)
    assert run["promoted"] == 4 and run["demoted"] == 0 and run["communities"] >= 1
    assert {n: t for n, (t, _) in (await tiers(engine)).items()} == {
        "Asha": "L1", "Priya": "L1", "Koramangala": "L1"
    }  # fmt: skip
    (coffee,) = await query(engine, "SELECT tier FROM entities WHERE type = 'topic'")
    assert coffee["tier"] == "L1"
    (one_off,) = await query(engine, "SELECT tier FROM entities WHERE type = 'promise'")
    assert one_off["tier"] == "L0"  # said once: stays an episode

    for n in (30, 60, 85):
        await say(engine, f"d{n:03d}", n, AGAIN)

    # Day 90 - a moment: not yet a pattern.
    await consolidate(engine, 89.9)
    assert (await tiers(engine))["Koramangala"] == ("L1", False)
    # Day 91: three months of the same café with the same friend: a deep pattern.
    await consolidate(engine, 91)
    assert await tiers(engine) == {
        "Asha": ("L2", False), "Priya": ("L2", False), "Koramangala": ("L2", False)
    }  # fmt: skip
    member = await query(engine, "SELECT community_id FROM entities WHERE name = 'Koramangala'")
    assert member[0]["community_id"] is not None

    # Day 95: "I gave up coffee" supersedes "I love coffee": Asha's fact was contradicted.
    await say(engine, "d095", 95, [("Asha", "Priya, I gave up coffee, it made me anxious.")])
    run = await consolidate(engine, 95)
    assert run["demoted"] == 1
    (asha,) = (await engine.get("/v1/entities", q="asha", type="person")).json()["entities"]
    assert asha["tier"] == "L1" and asha["contradicted"]
    assert [(f, t) for f, t, _ in await history(engine, "Asha")] == [
        ("L0", "L1"), ("L1", "L2"), ("L2", "L1")
    ]  # fmt: skip

    # Day 120: the table.
    run = await consolidate(engine, 120)
    assert run["promoted"] == 0 and run["demoted"] == 0
    assert await tiers(engine) == {
        "Asha": ("L1", False),  # contradicted 25 days ago: promotion still blocked
        "Priya": ("L2", False),
        "Koramangala": ("L2", False),  # last seen day 95, evergreen anyway
    }
    (one_off,) = await query(
        engine, "SELECT tier, low_salience, salience FROM entities WHERE type = 'promise'"
    )
    assert one_off["tier"] == "L0" and one_off["low_salience"]  # 2^-4 < 0.1: faded
    assert one_off["salience"] == pytest.approx(2 ** (-120 / 30), rel=1e-3)
    assert [(f, t, at) for f, t, at in await history(engine, "Koramangala")] == [
        ("L0", "L1", day(8)), ("L1", "L2", day(91))
    ]  # fmt: skip

    stats = (await engine.get("/v1/tiers/stats")).json()
    assert stats["tiers"]["L2"]["count"] == 2 and stats["tiers"]["L1"]["count"] >= 1
    assert stats["by_type"]["place"]["L2"] == 1
    assert stats["last_run"]["as_of"].startswith("2026-05-05")  # day 120
    assert stats["recent_changes"][0]["name"] == "Asha"  # the latest change: its demotion

    # Retrieval sees tiers: each result says its tier, and the filter keeps L2 memories only.
    r = (await engine.get("/v1/context", query="Koramangala coffee", limit=20)).json()
    assert {x["tier"] for x in r["results"]} >= {"L2"}
    only = (await engine.get("/v1/context", query="Koramangala coffee", tier="L2")).json()
    assert only["tiers"] == ["L2"] and only["results"]
    assert all(x["tier"] == "L2" for x in only["results"])
    assert "Book Fair" not in " ".join(x["text"] for x in only["results"])
    bad = await engine.get("/v1/context", query="coffee", tier="L3")
    assert bad.status_code == 422


async def test_runs_are_listed_idempotent_and_never_overlap(engine: Engine) -> None:
    await say(engine, "r1", 0, MORNING)
    await say(engine, "r2", 3, AGAIN)
    await say(engine, "r3", 5, AGAIN)
    first = await consolidate(engine, 10)
    changes = await query(engine, "SELECT count(*) AS n FROM entity_tier_history")
    again = await consolidate(engine, 10)
    assert first["promoted"] >= 3 and again["promoted"] == 0 and again["demoted"] == 0
    assert await query(engine, "SELECT count(*) AS n FROM entity_tier_history") == changes

    # Two requests at once: both run, one after the other (the second waits for the lock).
    a = await engine.post("/v1/consolidate", as_of=day(12).isoformat())
    b = await engine.post("/v1/consolidate", as_of=day(12).isoformat())
    assert a.status_code == b.status_code == 202
    ids = [a.json()["id"], b.json()["id"]]

    async def both_done() -> list[dict[str, Any]] | None:
        runs = [(await engine.get(f"/v1/consolidate/runs/{i}")).json() for i in ids]
        return runs if all(r["status"] == "done" for r in runs) else None

    runs = await eventually(both_done, "both runs")
    first_end = datetime.fromisoformat(runs[0]["finished_at"])
    assert datetime.fromisoformat(runs[1]["started_at"]) >= first_end
    listed = (await engine.get("/v1/consolidate/runs", limit=2)).json()["runs"]
    assert [r["id"] for r in listed] == ids[::-1]
    assert (await engine.get("/v1/consolidate/runs/999999")).status_code == 404


@pytest.fixture
async def kolkata(
    settings: Settings, falkordb_server: str, graph_group: str
) -> AsyncIterator[Engine]:
    update = {"graph_url": falkordb_server, "graph_group_id": graph_group,
              "timezone": "Asia/Kolkata"}  # fmt: skip
    async for e in start_graph_engine(settings.model_copy(update=update)):
        yield e


async def test_the_nightly_tick_runs_once_in_the_local_hour(kolkata: Engine) -> None:
    engine, jobs = kolkata, kolkata.runtime.jobs
    # 03:00 in Kolkata is 21:30 UTC the day before: the night is the local date.
    three_am = datetime(2026, 3, 1, 3, 0, tzinfo=ZoneInfo("Asia/Kolkata"))
    # The day before, in Kolkata: a promise made in the morning and kept in the evening.
    morning = datetime(2026, 2, 28, 9, 0, tzinfo=ZoneInfo("Asia/Kolkata"))
    await say(engine, "p1", morning, [("Asha", "I will book the train tickets to Pune.")])
    await say(engine, "p2", morning + timedelta(hours=10),
              [("Asha", "I booked the train tickets to Pune, we leave on Friday.")])  # fmt: skip
    assert await jobs.nightly(int((three_am - timedelta(hours=1)).timestamp())) == "not the hour"
    assert await jobs.nightly(int(three_am.timestamp())) == "done"
    later = int((three_am + timedelta(minutes=30)).timestamp())
    assert await jobs.nightly(later) == "night 2026-03-01 already consolidated"
    (run,) = (await engine.get("/v1/consolidate/runs")).json()["runs"]
    assert run["trigger"] == "schedule" and run["night"] == "2026-03-01"
    assert datetime.fromisoformat(run["as_of"]) == three_am
    # The night also found the promise kept and reflected on the day that ended.
    (kept,) = (await engine.get("/v1/promises", status="fulfilled")).json()["promises"]
    assert "train tickets" in kept["name"] and kept["fulfilled_by"] == "detected"
    (reflection,) = await query(engine, "SELECT day, text FROM daily_reflections")
    assert reflection["day"] == "2026-02-28" and "Pune" in reflection["text"]
    # A failed night is run again by the job's retry.
    async with engine.runtime.db.main.begin() as conn:
        await conn.execute(text("UPDATE consolidation_runs SET status = 'failed'"))
    assert await jobs.nightly(later) == "done"
