"""Stories of how people really talk, end to end: JSONL → the engine (fast extractor, real
PostgreSQL and FalkorDB) → /v1/facts, the entity profile, /v1/context and Annie's offline
answers, asserted through HTTP and Annie only (issue 36). Names and wording are this test's own.

Rosa talks with her neighbour Tomas over two months: a friend named in a question and then
only as "she"; a job that starts on a date ahead; a rowing habit given up; a promise to return
a ladder, kept; bees on the roof said twice; oat milk stopped.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from engine_harness import (
    TOKEN,
    Engine,
    graph_engine_settings,
    ingest,
    query,
    stages_done,
    start_graph_engine,
    write_conversation,
)
from pg_harness import fresh_database

from annie_voice.engine import EngineClient
from annie_voice.llm.offline import OfflineMemoryResponder

pytestmark = [pytest.mark.platform, pytest.mark.asyncio(loop_scope="module")]

DAY0 = datetime(2026, 1, 12, 9, 0, tzinfo=UTC)  # a Monday in January


def day(n: float) -> datetime:
    return DAY0 + timedelta(days=n)


SESSIONS: list[tuple[str, datetime, list[tuple[str, str]]]] = [
    ("st01", day(0), [
        ("Tomas", "Morning Rosa! Have you heard from Greta lately? Is she still in Porto?"),
        ("Rosa", "Yes, she moved to Lisbon last month. She runs a small ceramics studio now."),
        ("Tomas", "Good for her."),
        ("Rosa", "Every Saturday I row on the river with my club."),
        ("Rosa", "And I'm starting at the city library in March, Tomas."),
    ]),
    ("st02", day(2), [
        ("Rosa", "Tomas, I'll return your ladder on Friday."),
        ("Tomas", "No rush."),
        ("Rosa", "I keep bees on my roof. Did I tell you? I drink oat milk every morning."),
    ]),
    ("st03", day(5), [
        ("Rosa", "I brought your ladder back this morning, Tomas."),
        ("Tomas", "Thanks, I saw it by the shed."),
        ("Rosa", "I keep bees on the roof, you know, the honey is nearly ready."),
    ]),
    ("st04", day(30), [
        ("Tomas", "Are you still rowing on Saturdays?"),
        ("Rosa", "Honestly I've given up rowing, my shoulder hurts too much."),
        ("Rosa", "And I don't drink oat milk anymore, it upset my stomach."),
    ]),
]  # fmt: skip


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def module_database(postgres_server: tuple[str, str]) -> AsyncIterator[str]:
    async with fresh_database(postgres_server) as url:
        yield url


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def engine(
    module_database: str, falkordb_server: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Engine]:
    root: Path = tmp_path_factory.mktemp("statement-stories")
    settings = graph_engine_settings(root, module_database, falkordb_server)
    async for e in start_graph_engine(settings):
        for sid, started, lines in SESSIONS:
            write_conversation(settings.transcripts_dir, sid, started, lines)
            await ingest(e, sid)
            await stages_done(e, sid, deadline_s=120)
        yield e


async def said(
    engine: Engine, subject: str, as_of: datetime, *, history: bool = True
) -> list[dict[str, Any]]:
    r = await engine.get(
        "/v1/facts",
        subject=subject,
        as_of=as_of.isoformat(),
        history=str(history).lower(),
        limit=200,
    )
    assert r.status_code == 200, r.text
    return r.json()["statements"]


def find(items: list[dict[str, Any]], *words: str) -> dict[str, Any]:
    hits = [s for s in items if all(w.casefold() in s["text"].casefold() for w in words)]
    assert len(hits) == 1, ([s["text"] for s in items], words)
    return hits[0]


async def test_a_pronoun_in_the_answer_is_the_person_the_question_named(engine: Engine) -> None:
    about = await said(engine, "Greta", day(1))
    studio = find(about, "ceramics studio")
    assert studio["subject"] == "Greta" and studio["current"]
    assert studio["sources"][0]["speaker"] == "Rosa"
    assert find(about, "moved to Lisbon")["valid_at"].startswith("2025-12")  # "last month"


async def test_a_plan_becomes_true_on_its_date(engine: Engine) -> None:
    before = find(await said(engine, "Rosa", day(10)), "library")
    assert before["kind"] == "plan" and not before["current"]
    assert before["valid_at"].startswith("2026-03")
    after = find(await said(engine, "Rosa", datetime(2026, 3, 20, tzinfo=UTC)), "library")
    assert after["current"]


async def test_a_habit_given_up_ends_and_its_history_says_what_ended_it(engine: Engine) -> None:
    rowing = find(await said(engine, "Rosa", day(10)), "on the river")
    assert rowing["kind"] == "habit" and rowing["current"] and rowing["invalid_at"] is None
    later = await said(engine, "Rosa", day(40))
    rowing = find(later, "on the river")
    assert not rowing["current"]
    assert rowing["invalid_at"].startswith("2026-02-11")  # day 30
    assert "given up rowing" in rowing["ended_by"]["text"]
    assert not [s for s in await said(engine, "Rosa", day(40), history=False)
                if "on the river" in s["text"]]  # fmt: skip


async def test_a_promise_is_kept_when_the_same_act_is_done_to_the_same_thing(
    engine: Engine,
) -> None:
    promise = find(await said(engine, "Rosa", day(3)), "return", "ladder")
    assert promise["kind"] == "plan" and promise["kept_by"] is None
    promise = find(await said(engine, "Rosa", day(6)), "return", "ladder")
    assert promise["kept_by"] is not None and "brought" in promise["kept_by"]["text"]
    assert not promise["current"]


async def test_a_restatement_reinforces_one_fact_instead_of_adding_one(engine: Engine) -> None:
    bees = find(await said(engine, "Rosa", day(6)), "keep", "bees")
    assert len(bees["sources"]) == 2
    assert {s["session_id"] for s in bees["sources"]} == {"st02", "st03"}
    assert bees["confidence"] > max(0.85, 0.0)  # more than one source alone


async def test_a_contradiction_ends_the_fact_it_contradicts(engine: Engine) -> None:
    milk = find(await said(engine, "Rosa", day(10)), "drinks oat milk")
    assert milk["current"]
    milk = find(await said(engine, "Rosa", day(40)), "drinks oat milk")
    assert not milk["current"] and "drink oat milk anymore" in milk["ended_by"]["text"]


async def test_the_profile_lists_what_was_said_about_the_person(engine: Engine) -> None:
    rows = await query(engine, "SELECT id FROM entities WHERE name = 'Greta' AND type = 'person'")
    assert rows, "Greta was extracted as a person"
    r = await engine.get(f"/v1/entities/{rows[0]['id']}/profile", as_of=day(40).isoformat())
    assert r.status_code == 200, r.text
    texts = [s["text"] for s in r.json()["statements"]]
    assert any("ceramics studio" in t for t in texts), texts


async def test_context_tells_what_holds_now_and_what_ended(engine: Engine) -> None:
    r = await engine.get(
        "/v1/context", query="Does Rosa still row on the river?", as_of=day(40).isoformat()
    )
    assert r.status_code == 200, r.text
    said = r.json()["statements"]
    assert said and "on the river" in said[0]["text"] and not said[0]["current"]
    assert "given up rowing" in said[0]["ended_by"]["text"]
    r = await engine.get("/v1/context", query="Does Rosa keep bees?", as_of=day(40).isoformat())
    bees = r.json()["statements"][0]
    assert bees["current"] and "bees" in bees["text"] and bees["relevance"] >= 1


def annie_at(engine: Engine, now: datetime) -> OfflineMemoryResponder:
    class Clock(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> datetime:
            return now

    client = EngineClient("http://engine", TOKEN, transport=httpx.ASGITransport(app=engine.app))
    return OfflineMemoryResponder(client, clock=Clock)


async def test_annie_answers_a_still_question_with_what_ended_and_when(engine: Engine) -> None:
    # Annie asks the engine as of now: the stories are dated in the engine's past
    text = await annie_at(engine, datetime.now(UTC)).answer("Does Rosa still row on the river?")
    assert text.startswith("Not any more: Rosa has given up rowing"), text
    assert "Before that, every Saturday Rosa rows on the river" in text, text


async def test_the_daily_reflection_tells_what_was_given_up_and_what_was_kept(
    engine: Engine,
) -> None:
    r = await engine.get("/v1/daily", date=day(30).date().isoformat())
    assert r.status_code == 200, r.text
    ended = {x["ended_by"]: x for x in r.json()["statements_ended"]}
    rowing = next(x for by, x in ended.items() if "given up rowing" in by)
    assert not rowing["kept"] and "on the river" in rowing["text"]
    assert any("given up rowing" in line for line in r.json()["what_happened"])
    r = await engine.get("/v1/daily", date=day(5).date().isoformat())
    kept = [x for x in r.json()["statements_ended"] if x["kept"]]
    assert kept and "ladder" in kept[0]["text"] and "brought" in kept[0]["ended_by"]


async def test_nothing_is_kept_about_a_person_forgotten(engine: Engine) -> None:
    """Last in the module: it forgets Greta from the shared memory."""
    assert await said(engine, "Greta", day(40))
    r = await engine.client.post(
        "/v1/forget",
        params={"wait_s": 10},
        json={"person": "Greta"},
        headers={"X-Internal-Token": TOKEN},
    )
    assert r.status_code in (200, 202), r.text  # 200: every store done within wait_s
    assert r.json()["stores"]["postgres"]["statements"] == 2
    assert await said(engine, "Greta", day(40)) == []
    rows = await query(engine, "SELECT text FROM statements WHERE text ~* 'greta'")
    assert rows == []
    assert await said(engine, "Rosa", day(40))  # the others' statements stay
