from __future__ import annotations

from datetime import UTC, datetime, timedelta

from annie_doubles import TOKEN, EngineDouble, fact, memory
from hypothesis import given
from hypothesis import strategies as st

from annie_voice.briefing import clean
from annie_voice.engine import EngineClient
from annie_voice.llm.base import MemoryUsed, Message, TextDelta
from annie_voice.llm.offline import (
    LIMITS,
    OfflineMemoryResponder,
    clause,
    dated,
    gist,
    relative_day,
    same_person,
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
    text = await r.answer("where is Priya moving?")
    # One memory, the best: the answer, not a list of quotes.
    assert text == (
        "On Tuesday, Priya said: “I'm moving to Koramangala next month. The flat is near the park”."
    )
    # What it cannot do is said when it found nothing, not after every answer.
    assert LIMITS not in text
    assert dict(double.context_requests[0].url.params)["query"] == "where is Priya moving?"


async def test_owner_is_you() -> None:
    double = EngineDouble(memories=[memory("I promised to call mum", speaker="Asha")])
    r = responder(double, owner_speakers=["asha"])
    text = await r.answer("what did I promise?")
    assert "you said: “I promised to call mum”" in text


async def test_says_plainly_when_nothing_is_found_and_what_it_cannot_do() -> None:
    r = responder(EngineDouble(memories=[]))
    text = await r.answer("what is the capital of France?")
    assert "found nothing" in text
    assert "can't use general knowledge, search the web or run tools" in text


async def test_engine_down_is_said_plainly() -> None:
    r = responder(EngineDouble(mode="down"))
    text = await r.answer("where is Priya?")
    assert "couldn't reach your memories" in text


async def test_the_sentence_asked_about_is_quoted_not_the_segments_first() -> None:
    # A diarized segment often runs two sentences together; the question is about the second.
    double = EngineDouble(
        memories=[memory("heard a beep. This is Diane in New Jersey.", speaker="unknown_2")]
    )
    text = await responder(double).answer("Where is Diane living now?")
    assert "said: “This is Diane in New Jersey”." in text
    assert "beep" not in text


async def test_a_sentence_pointing_back_is_quoted_with_the_one_before() -> None:
    # "It's about …" matches the question; what "it" is lies in the sentence before.
    double = EngineDouble(
        memories=[
            memory(
                "Totally! Rise Up by Andra Day means a lot to me. It's about getting up again "
                "after a fall. Anyway, how was your week?",
                speaker="Noor",
            )
        ]
    )
    text = await responder(double).answer("Which song is about getting up after a fall?")
    assert "“Rise Up by Andra Day means a lot to me. It's about getting up again" in text
    assert "Totally" not in text
    assert "how was your week" not in text


async def test_an_old_quote_is_not_dated_unless_the_question_asks_when() -> None:
    old = memory("I adopted a beagle called Pixel", speaker="Omar", when=NOW - timedelta(days=40))
    text = await responder(EngineDouble(memories=[old])).answer("What dog does Omar have?")
    assert text == "Omar said: “I adopted a beagle called Pixel”."
    text = await responder(EngineDouble(memories=[old])).answer("When did Omar adopt a dog?")
    assert text.startswith("On 4 April, Omar said: “I adopted a beagle called Pixel”")


def test_gist_prefers_telling_words_and_otherwise_the_first_sentence() -> None:
    segment = "The flat is near the park. I'm moving to Koramangala next month."
    whole = "The flat is near the park. I'm moving to Koramangala next month"
    assert gist(segment) == whole  # no question: from the start
    assert gist(segment, "where is Priya moving?") == "I'm moving to Koramangala next month"
    # "the" and "is" are in both sentences and in the question: they decide nothing
    assert gist(segment, "what is the plan?") == whole
    # the sentence asked about, and the statement after it (what it points at)
    said = "That race sounds great, Mel! Raising awareness for mental health is rewarding. Ok?"
    assert gist(said, "What did the race raise awareness for?") == (
        "That race sounds great, Mel! Raising awareness for mental health is rewarding"
    )
    # "when" is answered by the day: the sentence that dates it, alone
    assert gist(said, "When did Mel run the race?") == "That race sounds great, Mel!"
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


async def test_a_question_found_is_answered_by_the_memory_after_it() -> None:
    double = EngineDouble(memories=[
        memory("Where are you moving, Priya? Tell me everything.", speaker="Asha", score=0.9),
        memory("To Lisbon, in March!", score=0.7),
        memory("We should have dinner.", score=0.2),
    ])  # fmt: skip
    text = await responder(double).answer("Where is Priya moving?")
    assert text.startswith("Here's what I remember. ") and "To Lisbon, in March!" in text
    assert "dinner" not in text


def test_the_gist_is_a_statement_before_a_question() -> None:
    said = "Do you like Lisbon? I moved to Lisbon in March."
    assert gist(said, "When did Priya move to Lisbon?") == "I moved to Lisbon in March"


async def test_the_answer_streams_sentence_by_sentence() -> None:
    double = EngineDouble(memories=[memory("Priya, are you moving to Lisbon in March?", score=0.9),
                                    memory("We should have dinner.", score=0.8)])  # fmt: skip
    parts = [
        e.text
        async for e in responder(double).stream(
            system="", messages=[Message(role="user", content="Priya?")], tools=[]
        )
        if isinstance(e, TextDelta)
    ]
    assert parts[0] == "Here's what I remember. "  # the first sentence, whole, for the voice
    assert len(parts) == 3 and "Lisbon" in parts[1] and "dinner" in parts[2]


# --- answers from what is known (issue 24) ---------------------------------------------------

SWITCH = memory(
    "No thanks. I've been switching to tea, coffee keeps giving me headaches.",
    speaker="Arjun", when=NOW - timedelta(days=3), score=0.4,
)  # fmt: skip
OLD_COFFEE = memory("I love coffee, every single morning.", speaker="Arjun", score=0.9,
                    when=NOW - timedelta(days=90))  # fmt: skip
ARJUN = {"name": "Arjun", "type": "person", "owner": True, "id": 1, "tier": "L1"}


def words(text: str) -> int:
    return len(text.split())


async def test_the_current_fact_is_the_answer_with_what_it_replaced() -> None:
    double = EngineDouble(
        memories=[OLD_COFFEE, SWITCH],  # the old quote ranks first: the fact still leads
        about=[ARJUN, {"name": "coffee", "type": "topic", "owner": False, "id": 2, "tier": "L2"}],
        facts=[
            fact("Arjun avoids coffee", "Arjun", "AVOIDS", "coffee",
                 since=NOW - timedelta(days=3),
                 replaced=[("Arjun likes coffee", "coffee", "2026-05-11T08:00:00Z")],
                 sources=[SWITCH]),
        ],
    )  # fmt: skip
    text = await responder(double).answer("Do I still like coffee?")
    assert text.startswith("You avoid coffee (since Monday). Before that, you liked coffee.")
    assert text.endswith(
        "On Monday, you said: “I've been switching to tea, coffee keeps giving me headaches”."
    )
    assert "every single morning" not in text  # the superseded quote is not read back
    assert words(text) < 40


async def test_a_named_persons_fact_and_a_relation_told_from_their_side() -> None:
    moved = memory("Kavya moved to Hyderabad last week, her new team is there.",
                   speaker="Arjun", when=NOW - timedelta(days=20))  # fmt: skip
    double = EngineDouble(
        memories=[moved],
        about=[{"name": "Kavya", "type": "person", "owner": False, "id": 3, "tier": "L1"}],
        facts=[
            fact("Kavya lives in Hyderabad", "Kavya", "LIVES_IN", "Hyderabad",
                 since=NOW - timedelta(days=20),
                 replaced=[("Kavya lives in Pune", "Pune", "2026-04-24T00:00:00Z")],
                 sources=[moved]),
            fact("Arjun's sibling is Kavya", "Arjun", "SIBLING", "Kavya"),
        ],
    )  # fmt: skip
    r = responder(double, owner_speakers=["Arjun"])
    text = await r.answer("Where does Kavya live now?")
    assert text.startswith(
        "Kavya lives in Hyderabad (since 24 April). Before that, Kavya lived in Pune."
    )
    assert "You said: “Kavya moved to Hyderabad last week, her new team is there”" in text
    # who she is: the relation from her side, "you" for the owner
    double.facts.reverse()
    assert (await r.answer("Who is Kavya?")).startswith("Kavya is your sibling")


async def test_a_name_nobody_mentioned_is_not_answered_with_other_memories() -> None:
    double = EngineDouble(memories=[memory("We had dosa for lunch", score=0.3)])
    text = await responder(double).answer("Who is Zoltan?")
    assert text == "I don't know: nothing is remembered about Zoltan."


async def test_the_answer_says_which_facts_and_memories_it_used() -> None:
    double = EngineDouble(
        memories=[SWITCH], about=[ARJUN],
        facts=[fact("Arjun drinks tea", "Arjun", "DRINKS", "tea", sources=[SWITCH])],
    )  # fmt: skip
    events = [
        e
        async for e in responder(double).stream(
            system="", messages=[Message(role="user", content="What do I drink?")], tools=[]
        )
    ]
    used = events[0]
    assert isinstance(used, MemoryUsed)
    assert [f.fact for f in used.facts] == ["Arjun drinks tea"]
    assert [m.text for m in used.memories] == [SWITCH["text"]]
    assert "".join(e.text for e in events[1:] if isinstance(e, TextDelta)).startswith(
        "You drink tea"
    )


def test_clauses_in_second_person_and_in_the_past() -> None:
    assert clause("Arjun lives in Pune", "Arjun", you=True) == "you live in Pune"
    assert clause("Arjun studies at IIT", "Arjun", you=True) == "you study at IIT"
    assert clause("Arjun is from Goa", "Arjun", you=True) == "you are from Goa"
    assert clause("Arjun drinks coffee", "Arjun", you=True, tense="past") == "you drank coffee"
    assert clause("Arjun likes Nike", "Arjun", you=False, tense="past") == "Arjun liked Nike"
    assert clause("Arjun works at Infosys", "Arjun", you=False, tense="past") == (
        "Arjun worked at Infosys"
    )
    assert clause("Arjun's spouse is Meera", "Arjun", you=True) == "your spouse is Meera"
    assert clause("Arjun's spouse is Meera", "Arjun", you=False, tense="past") == (
        "Arjun's spouse was Meera"
    )
    assert clause("Arjun moved to Pune", "Arjun", you=True, tense="past") == "you moved to Pune"
    # a fact that does not start with its subject is read as it is
    assert clause("coffee is bitter", "Arjun", you=True) == "coffee is bitter"


async def test_words_about_someone_else_are_not_told_as_the_asked_persons() -> None:
    caroline = {"name": "Caroline", "type": "person", "owner": False, "id": 4, "tier": "L0"}
    double = EngineDouble(
        about=[caroline],
        memories=[memory("That charity race sounds great, Mel! You must be proud.",
                         speaker="Caroline", when=NOW - timedelta(days=2))],
    )  # fmt: skip
    r = responder(double)
    text = await r.answer("What did Caroline realize after her charity race?")
    assert text.startswith("I don't know that about Caroline; the closest is Caroline talking")
    assert "“That charity race sounds great, Mel! You must be proud”" in text
    # Her own words about herself are hers; and a question about what she said is answered.
    double.memories = [memory("I ran a charity race for mental health, Mel!",
                              speaker="Caroline", when=NOW - timedelta(days=2))]  # fmt: skip
    assert (await r.answer("What did Caroline realize after her charity race?")).startswith(
        "On Tuesday, Caroline said"
    )
    double.memories = [memory("That race sounds great, Mel!", speaker="Caroline")]
    assert not (await r.answer("What did Caroline say about the race?")).startswith("I don't")


def test_relative_dates_are_read_against_when_they_were_said() -> None:
    said = datetime(2023, 5, 8, 13, 0, tzinfo=UTC)  # a Monday
    assert dated("I went to a support group yesterday", said, UTC) == "7 May 2023"
    assert dated("I ran a charity race last Sunday", said, UTC) == "7 May 2023"
    assert dated("we met last week", said, UTC) == "the week before 8 May 2023"
    assert dated("last weekend was fun", said, UTC) == "the weekend before 8 May 2023"
    assert dated("I painted that last year", said, UTC) == "2022"
    assert dated("a few months ago", said, UTC) == "February 2023"
    assert dated("no date here", said, UTC) is None
    assert dated("yesterday", None, UTC) is None
    # a month named with "last": the last one before the day it was said
    assert dated("we were in Rome last August", said, UTC) == "August 2022"
    assert dated("last May was cold", said, UTC) == "May 2022"
    assert dated("last March", said, UTC) == "March 2023"
    # ahead: what a plan names
    assert dated("I fly out tomorrow", said, UTC) == "9 May 2023"
    assert dated("a conference next month", said, UTC) == "June 2023"
    assert dated("we're hiking this weekend", said, UTC) == "the weekend after 8 May 2023"
    assert dated("maybe next week", said, UTC) == "the week after 8 May 2023"
    assert dated("next year, for sure", said, UTC) == "2024"
    assert dated("in 3 days", said, UTC) == "11 May 2023"


async def test_what_someone_else_said_of_themselves_is_not_told_as_the_asked_persons() -> None:
    """Asked about Ines, the memory that says most of what is asked is Tomas speaking of
    himself: the answer says it knows nothing of that about Ines and whose words they are."""
    ines = {"name": "Ines", "type": "person", "owner": False, "id": 5, "tier": "L0"}
    day = datetime(2024, 3, 4, 18, 0, tzinfo=UTC)
    double = EngineDouble(
        about=[ines],
        memories=[
            memory("Hey Tomas! How was the weekend?", speaker="Ines", when=day, score=0.9),
            memory("I finally finished the half marathon in Porto. My knees hurt though!",
                   speaker="Tomas", when=day, score=0.8),
        ],
    )  # fmt: skip
    r = responder(double)
    text = await r.answer("Which half marathon did Ines finish?")
    assert text.startswith("I don't know that about Ines; the closest is Tomas talking about")
    assert "Tomas said: “I finally finished the half marathon in Porto" in text
    # her own words about herself answer it
    double.memories.append(
        memory("I finished the half marathon in Braga too, my first!", speaker="Ines", when=day,
               score=0.7)
    )  # fmt: skip
    text = await r.answer("Which half marathon did Ines finish?")
    assert not text.startswith("I don't know"), text
    # someone else naming her speaks of her: not "someone else"
    double.memories = [
        memory("Ines finished the half marathon in Braga, we cheered!", speaker="Tomas",
               when=day),
    ]  # fmt: skip
    assert not (await r.answer("Which half marathon did Ines finish?")).startswith("I don't")
    # a question about what was said is answered with the words, whoever they are about
    double.memories = [memory("I finished the half marathon in Porto!", speaker="Tomas")]
    assert not (await r.answer("What did Ines say about the marathon?")).startswith("I don't")


def test_a_short_name_is_the_same_person() -> None:
    assert same_person("Mel", "Melanie") and same_person("Melanie", "mel")
    assert same_person("Jo Silva", "Jo Silva")
    assert not same_person("Al", "Alice")  # too short to tell
    assert not same_person("Tomas", "Tom Hardy")
    assert not same_person("Ines", "Tomas")


async def test_when_is_answered_with_the_day_the_words_name() -> None:
    double = EngineDouble(memories=[memory(
        "I went to a support group yesterday. It was powerful.", speaker="Caroline",
        when=datetime(2023, 5, 8, 13, 0, tzinfo=UTC),
    )])  # fmt: skip
    text = await responder(double).answer("When did Caroline go to the support group?")
    assert text == (
        "7 May 2023: on 8 May 2023, Caroline said “I went to a support group yesterday”."
    )


async def test_who_is_someone_is_their_relation_but_not_a_question_about_them() -> None:
    said = memory("Kavya loves Ed Sheeran, she plays him all day.", speaker="Arjun")
    double = EngineDouble(
        memories=[said],
        about=[{"name": "Kavya", "type": "person", "owner": False, "id": 3, "tier": "L1"}],
        facts=[fact("Arjun's sibling is Kavya", "Arjun", "SIBLING", "Kavya")],
    )  # fmt: skip
    r = responder(double, owner_speakers=["Arjun"])
    assert (await r.answer("Who is Kavya?")).startswith("Kavya is your sibling")
    text = await r.answer("Who is Kavya a fan of?")
    assert "sibling" not in text and "Ed Sheeran" in text


def statement(text: str, subject: str, *, current: bool, valid_at: datetime,
              kind: str = "fact", ended_by: str | None = None, ended_at: datetime | None = None,
              instead: list[tuple[str, datetime]] = (), relevance: int = 1,
              kept_by: str | None = None) -> dict:  # fmt: skip
    """One item of /v1/context's `statements` (the engine's ContextStatement)."""

    def src(t: str, at: datetime) -> dict:
        return {"session_id": "s1", "segment_id": "s1-0", "said_at": at.isoformat(),
                "speaker": subject, "text": t}  # fmt: skip

    return {
        "id": 1, "subject": subject, "predicate": "x", "object": "", "text": text, "kind": kind,
        "confidence": 0.85, "valid_at": valid_at.isoformat(),
        "invalid_at": ended_at.isoformat() if ended_at else None, "current": current,
        "ended_by": src(ended_by, ended_at) if ended_by and ended_at else None,
        "kept_by": src(kept_by, valid_at) if kept_by else None,
        "sources": [src(text, valid_at)], "relevance": relevance,
        "instead": [{"text": t, "valid_at": at.isoformat()} for t, at in instead],
    }  # fmt: skip


async def test_a_still_question_answers_what_holds_now_what_it_replaced_and_when() -> None:
    double = EngineDouble(
        about=[ARJUN],
        statements=[
            statement("Arjun plays chess at the club every Thursday", "Arjun", current=False,
                      kind="habit", valid_at=NOW - timedelta(days=60),
                      ended_by="Arjun has given up chess", ended_at=NOW - timedelta(days=3),
                      instead=[("Arjun plays go now", NOW - timedelta(days=3))]),
        ],
    )  # fmt: skip
    text = await responder(double).answer("Do I still play chess?")
    assert text.startswith(
        "Not any more: you have given up chess (on Monday). Before that, you played chess at "
        "the club every Thursday. Now: you play go now (since Monday)."
    ), text


async def test_a_statement_about_someone_named_is_told_with_since_when() -> None:
    double = EngineDouble(
        about=[{"name": "Greta", "type": "person", "owner": False, "id": 3, "tier": "L2"}],
        statements=[statement("Greta runs a small ceramics studio", "Greta", current=True,
                              valid_at=NOW - timedelta(days=40))],
    )  # fmt: skip
    text = await responder(double).answer("What does Greta do for work now?")
    assert text.startswith("Greta runs a small ceramics studio (since 4 April)."), text


async def test_a_statement_sharing_no_word_with_the_question_is_not_the_answer() -> None:
    double = EngineDouble(
        memories=[SWITCH],
        about=[ARJUN],
        statements=[statement("Arjun keeps bees", "Arjun", current=True, relevance=0,
                              valid_at=NOW - timedelta(days=4))],
    )  # fmt: skip
    text = await responder(double).answer("Why did I switch to tea?")
    assert "bees" not in text and "switching to tea" in text


async def test_only_a_question_about_what_holds_now_is_answered_from_statements() -> None:
    double = EngineDouble(
        memories=[SWITCH],
        about=[ARJUN],
        statements=[statement("Arjun drinks tea now", "Arjun", current=True, relevance=1,
                              valid_at=NOW - timedelta(days=3))],
    )  # fmt: skip
    text = await responder(double).answer("What did I say about tea?")
    assert "switching to tea" in text and not text.startswith("You drink tea")
    text = await responder(double).answer("Do I still drink tea?")
    assert text.startswith("You drink tea now (since Monday)."), text
