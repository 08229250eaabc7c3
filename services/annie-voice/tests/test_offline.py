from __future__ import annotations

from datetime import UTC, datetime, timedelta

from annie_doubles import TOKEN, EngineDouble, memory
from hypothesis import given
from hypothesis import strategies as st

from annie_voice.briefing import clean
from annie_voice.engine import EngineClient
from annie_voice.llm.base import Message, TextDelta
from annie_voice.llm.offline import (
    LIMITS,
    OfflineMemoryResponder,
    gist,
    relative_day,
    sentences,
)

NOW = datetime(2026, 5, 14, 12, 0, tzinfo=UTC)  # a Thursday


class FixedClock(datetime):
    @classmethod
    def now(cls, tz=None):
        return NOW


def responder(double: EngineDouble, **kw) -> OfflineMemoryResponder:
    engine = EngineClient("http://engine", TOKEN, transport=double.transport())
    return OfflineMemoryResponder(engine, clock=FixedClock, **kw)


def test_relative_days() -> None:
    assert relative_day(NOW - timedelta(hours=2), NOW, UTC) == "today"
    assert relative_day(NOW - timedelta(days=1), NOW, UTC) == "yesterday"
    assert relative_day(NOW - timedelta(days=2), NOW, UTC) == "on Tuesday"
    assert relative_day(NOW - timedelta(days=10), NOW, UTC) == "on 4 May"
    assert relative_day(datetime(2024, 3, 3, tzinfo=UTC), NOW, UTC) == "on 3 March 2024"


async def test_answers_from_memory_in_sentences() -> None:
    double = EngineDouble(
        memories=[
            memory(
                "I'm moving to Koramangala next month. The flat is near the park.",
                speaker="Priya",
                when=NOW - timedelta(days=2),
                score=0.9,
            ),
            memory(
                "Priya said the rent in Koramangala is high",
                speaker="SPEAKER_01",
                when=NOW - timedelta(days=1),
                score=0.6,
            ),
            memory("unrelated chatter about cricket", score=0.1),
        ]
    )
    r = responder(double)
    text = await r.answer("where is Priya moving?", first_turn=True)
    assert "On Tuesday, Priya said: “I'm moving to Koramangala next month”." in text
    assert "Yesterday, someone said: “Priya said the rent in Koramangala is high”." in text
    assert "cricket" not in text  # far below the best: not picked
    assert "The flat is near the park" not in text  # the gist, not the whole segment
    assert LIMITS in text
    assert dict(double.context_requests[0].url.params)["query"] == "where is Priya moving?"
    later = await r.answer("where is Priya moving?", first_turn=False)
    assert LIMITS not in later


async def test_owner_is_you() -> None:
    double = EngineDouble(memories=[memory("I promised to call mum", speaker="Asha")])
    r = responder(double, owner_speakers=["asha"])
    text = await r.answer("what did I promise?", first_turn=False)
    assert "you said: “I promised to call mum”" in text


async def test_says_plainly_when_nothing_is_found_and_what_it_cannot_do() -> None:
    r = responder(EngineDouble(memories=[]))
    text = await r.answer("what is the capital of France?", first_turn=False)
    assert "found nothing" in text
    assert "can't use general knowledge, search the web or run tools" in text


async def test_engine_down_is_said_plainly() -> None:
    r = responder(EngineDouble(mode="down"))
    text = await r.answer("where is Priya?", first_turn=True)
    assert "couldn't reach your memories" in text


async def test_the_sentence_asked_about_is_quoted_not_the_segments_first() -> None:
    # A diarized segment often runs two sentences together; the question is about the second.
    double = EngineDouble(
        memories=[memory("heard a beep. This is Diane in New Jersey.", speaker="unknown_2")]
    )
    text = await responder(double).answer("Where is Diane living now?", first_turn=False)
    assert "said: “This is Diane in New Jersey”." in text
    assert "beep" not in text


def test_gist_prefers_telling_words_and_otherwise_the_first_sentence() -> None:
    segment = "The flat is near the park. I'm moving to Koramangala next month."
    assert gist(segment) == "The flat is near the park"  # no question: the first
    assert gist(segment, "where is Priya moving?") == "I'm moving to Koramangala next month"
    # "the" and "is" are in both sentences and in the question: they decide nothing
    assert gist(segment, "what is the plan?") == "The flat is near the park"
    assert gist("", "anything") == ""


@given(
    st.text(alphabet=st.sampled_from("abc .!?”\n"), max_size=60),
    st.text(alphabet=st.sampled_from("abc "), max_size=12),
)
def test_the_gist_is_a_piece_of_the_segment(text: str, query: str) -> None:
    assert gist(text, query).removesuffix("…") in clean(text)


@given(st.text(alphabet=st.sampled_from("ab .!?”\n"), max_size=40))
def test_sentences_lose_nothing(text: str) -> None:
    assert "".join(sentences(text)) == text


async def test_the_answer_streams_sentence_by_sentence() -> None:
    double = EngineDouble(memories=[memory("I am moving to Lisbon in March.", score=0.9),
                                    memory("We should have dinner.", score=0.8)])  # fmt: skip
    parts = [
        e.text
        async for e in responder(double).stream(
            system="", messages=[Message(role="user", content="Priya?")], tools=[]
        )
        if isinstance(e, TextDelta)
    ]
    assert parts[0] == "Here's what I remember. "  # the first sentence, whole, for the voice
    assert len(parts) == 4 and "Lisbon" in parts[1] and parts[-1].startswith("I'm answering")
