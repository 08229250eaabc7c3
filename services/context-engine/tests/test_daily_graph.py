"""The daily reflection says what happened, end to end: JSONL sessions → the engine (fast
extractor, no LLM, real PostgreSQL and FalkorDB) → GET /v1/daily.

Nisha's week: on Monday she says her brother Tariq lives in Lucknow and that she drinks coffee
every morning; on Saturday morning that Tariq moved to Bhopal for a new job, and she promises
to send him a housewarming gift; on Saturday evening that she switched to green tea; on
Monday after, that she sent the gift. Saturday's reflection tells the move and the switch as
changes (with what they replaced), the promise made and the day's mood; the next Monday's
tells the promise kept. One engine serves the module.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from engine_harness import Engine, graph_engine_settings, ingest, stages_done, start_graph_engine

from context_engine.config import Settings
from context_engine.memory import day_facts
from context_engine.memory.daily import day_bounds
from her_os_shared.jsonl import append_records
from her_os_shared.transcript import Emotion, Segment, TranscriptPayload

pytestmark = [pytest.mark.platform, pytest.mark.asyncio(loop_scope="module")]

TZ = "Asia/Kolkata"
Line = tuple[str, str, str | None]

SESSIONS: list[tuple[str, datetime, list[Line]]] = [
    ("w1", datetime(2025, 3, 3, 4, 30, tzinfo=UTC), [  # Monday 10:00 in Kolkata
        ("Leena", "How is your family doing, Nisha?", None),
        ("Nisha", "My brother Tariq lives in Lucknow, he teaches at a school there.", "neutral"),
        ("Nisha", "And I drink coffee every morning before work.", "happy"),
    ]),
    ("x1", datetime(2025, 3, 8, 3, 30, tzinfo=UTC), [  # Saturday 09:00
        ("Leena", "Any news from Tariq?", None),
        ("Nisha", "Big news, Tariq moved to Bhopal for a new job at a hospital.", "happy"),
        ("Nisha", "I promise I will send Tariq a housewarming gift this week.", "happy"),
    ]),
    ("x2", datetime(2025, 3, 8, 14, 0, tzinfo=UTC), [  # Saturday 19:30
        ("Nisha", "I've switched to green tea, coffee keeps me awake at night.", "sad"),
        ("Leena", "Green tea is a good idea.", "neutral"),
    ]),
    ("y1", datetime(2025, 3, 10, 5, 0, tzinfo=UTC), [  # the Monday after, 10:30
        ("Nisha", "I sent Tariq a housewarming gift yesterday, he loved it.", "happy"),
    ]),
]  # fmt: skip


def write(settings: Settings, session_id: str, started_at: datetime, lines: list[Line]) -> None:
    segments = [
        Segment(
            segment_id=f"{session_id}-{i}", speaker=speaker, text=said, start=i * 20.0,
            end=i * 20.0 + 15, stt_engine="test",
            emotion=Emotion(label=label, score=0.8, engine="test") if label else None,
        )
        for i, (speaker, said, label) in enumerate(lines)
    ]  # fmt: skip
    payload = TranscriptPayload(
        session_id=session_id, device_id="dev1", session_started_at=started_at, segments=segments
    )
    append_records(settings.transcripts_dir, session_id, [payload])


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def engine(
    module_database: str, falkordb_server: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Engine]:
    """The week spoken, extracted and graphed, in the order it was said."""
    root: Path = tmp_path_factory.mktemp("daily-graph")
    settings = graph_engine_settings(
        root, module_database, falkordb_server, timezone=TZ, vector_index_enabled=False
    )
    async for e in start_graph_engine(settings):
        for session_id, started_at, lines in SESSIONS:
            write(settings, session_id, started_at, lines)
            await ingest(e, session_id)
            await stages_done(e, session_id, ("extract", "graph"))
        yield e


async def daily(engine: Engine, day: str) -> dict[str, Any]:
    r = await engine.get("/v1/daily", date=day)
    assert r.status_code == 200, r.text
    return r.json()


async def test_the_first_day_tells_what_became_known(engine: Engine) -> None:
    found = await daily(engine, "2025-03-03")
    assert found["details"]["facts_source"] == "graph"
    assert found["facts_changed"] == []
    new = {f["statement"]: f for f in found["facts_new"]}
    assert {"Tariq lives in Lucknow", "Nisha drinks coffee"} <= set(new), new
    assert new["Tariq lives in Lucknow"]["segment_id"] == "w1-1"
    assert found["text"].startswith("Reflection on Monday 3 March 2025. ")
    assert "Tariq lives in Lucknow." in found["text"].split("\n\n")[0]


async def test_a_move_and_a_switch_are_told_as_changes_with_the_promise_and_the_mood(
    engine: Engine,
) -> None:
    found = await daily(engine, "2025-03-08")
    assert found["details"]["facts_source"] == "graph"
    changes = {c["statement"]: c for c in found["facts_changed"]}
    move = changes.get("Tariq moved from Lucknow to Bhopal")
    assert move is not None, list(changes)
    assert (move["subject"], move["predicate"], move["object"]) == ("Tariq", "moved_to", "Bhopal")
    assert move["session_id"] == "x1" and move["segment_id"] == "x1-1"
    assert move["previous"]["statement"] == "Tariq lived in Lucknow"
    assert move["previous"]["session_id"] == "w1"
    switch = changes.get("Nisha switched from coffee to tea")
    assert switch is not None, list(changes)
    assert switch["previous"]["statement"] == "Nisha drank coffee"
    # what was known already is not news again
    assert not [f for f in found["facts_new"] if f["object"] in ("Lucknow", "coffee")]

    (made,) = found["promises_made"]
    assert "housewarming gift" in made["name"] and made["speaker"] == "Nisha"
    assert found["promises_kept"] == []

    happened = found["what_happened"]
    assert happened[:2] == [
        "Tariq moved from Lucknow to Bhopal.",
        "Nisha switched from coffee to tea.",
    ]
    assert "Nisha promised to send Tariq a housewarming gift this week." in happened
    first, *rest = found["text"].split("\n\n")
    assert first.startswith(
        "Reflection on Saturday 8 March 2025. Tariq moved from Lucknow to Bhopal. "
        "Nisha switched from coffee to tea."
    )
    assert "Nisha promised to send Tariq a housewarming gift this week." in first
    assert found["emotional_arc"].startswith(
        "The mood went from happy in the morning to sad in the evening."
    )
    assert found["emotional_arc"] in rest
    assert found["details"]["facts_changed"] == found["facts_changed"]

    # Without the graph (PostgreSQL's extracted relations, the same rules) the day's news
    # reads the same.
    start, end = day_bounds(date(2025, 3, 8), TZ)
    async with engine.runtime.db.main.connect() as conn:
        fallback = await day_facts.day_facts(
            conn, start=start, end=end, speakers=["Nisha", "Leena"], mentioned=[]
        )
    assert fallback.source == "postgres"
    assert [c["statement"] for c in fallback.changed] == [
        c["statement"] for c in found["facts_changed"]
    ]
    assert [f["statement"] for f in fallback.new] == [f["statement"] for f in found["facts_new"]]


async def test_the_promise_kept_is_told_on_the_day_it_was_kept(engine: Engine) -> None:
    found = await daily(engine, "2025-03-10")
    (kept,) = found["promises_kept"]
    assert "housewarming gift" in kept["name"] and kept["fulfilled_at"].startswith("2025-03-10")
    assert found["promises_made"] == []
    said = (
        "Nisha kept the promise to send Tariq a housewarming gift this week "
        "(made on Saturday 8 March 2025)."
    )
    assert said in found["what_happened"]
    assert found["text"].split("\n\n")[0].endswith(said)
    assert (
        "There was one conversation: 10:30–10:30 with Nisha; one thing said in all."
        in (found["text"])
    )
    assert found["emotional_arc"].startswith("The mood stayed happy (morning).")
