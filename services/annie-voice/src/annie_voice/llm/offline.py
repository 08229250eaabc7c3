"""The offline memory responder: Annie without a language model. It answers from
`/v1/context` in plain sentences: what is known first — the current fact about what was asked,
since when, what it replaced ("Kavya lives in Hyderabad (since 1 May). Before that, Kavya lived
in Pune.") and one quote behind it — else the best one or two memories quoted ("On Tuesday,
Priya said: “…”."); a name nobody mentioned, or nothing found, is said plainly (with what it
cannot do). Each answer also says which facts and memories it used (`MemoryUsed`)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Literal
from zoneinfo import ZoneInfo

from annie_voice.briefing import clean
from annie_voice.engine import (
    EngineClient,
    EngineUnavailableError,
    KnownFact,
    KnownStatement,
    Memory,
    Recall,
)
from annie_voice.llm.base import MemoryUsed, Message, StreamEvent, TextDelta, Tool
from annie_voice.lookahead import MemoryLookahead
from her_os_shared.dates import resolve

LIMITS = (
    "I'm answering from your memories only: no language model is configured, so I can't use "
    "general knowledge, search the web or run tools."
)
# Diarization labels that name nobody.
_ANONYMOUS = re.compile(r"^(speaker[_ ]?\d+|unknown[_ ]?\d+|unknown|spk\d+)$", re.IGNORECASE)
# A sentence: up to a full stop, question or exclamation mark (and a closing quote) followed
# by spaces or the end; or the rest of the text.
_SENTENCE_PIECE = re.compile(r".+?[.!?][”\"’)]*(?:\s+|$)|.+$", re.DOTALL)
GIST_CHARS = 200
_WORD = re.compile(r"\w+")
# Words a question shares with any sentence, which say nothing about which sentence answers it.
_COMMON = frozenset(
    "the and are was were what where when who whom why how did does you your about that this "
    "with for from have has had".split()
)
SEARCH_LIMIT = 8
# How an answer quoting two memories opens (one is quoted without a lead).
LEAD_MANY = "Here's what I remember."


def relative_day(when: datetime, now: datetime, zone: tzinfo) -> str:
    """`today`, `yesterday`, `on Tuesday` (within the week), `on 3 May`, `on 3 May 2024`."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    day: date = when.astimezone(zone).date()
    today: date = now.astimezone(zone).date()
    delta = (today - day).days
    if delta == 0:
        return "today"
    if delta == 1:
        return "yesterday"
    if 1 < delta < 7:
        return f"on {day.strftime('%A')}"
    if day.year == today.year:
        return f"on {day.day} {day.strftime('%B')}"
    return f"on {_day_month_year(day)}"


def sentences(text: str) -> list[str]:
    """`text` cut after each sentence's end (and the spaces after it); joined, it is `text`."""
    return [part for part in _SENTENCE_PIECE.findall(text) if part]


def _telling(query: str) -> set[str]:
    """The words of `query` that can tell one sentence from another (3+ letters, not common)."""
    words = _WORD.findall(query.casefold())
    return {w for w in words if len(w) >= 3 and w not in _COMMON}


def is_question(text: str) -> bool:
    return text.rstrip(' ”"’)').endswith("?")


_WHEN = re.compile(r"^(?:when|what (?:day|date|year|month|time))\b", re.IGNORECASE)
# A sentence opening with a word that points at the one before it ("It's about …"); not
# "this", which as often introduces ("This is Diane").
_POINTS_BACK = re.compile(
    r"^(?:it|it's|its|that|that's|those|they|they're|he|she|him|her|them|there|then)\b",
    re.IGNORECASE,
)


def _overlap(wanted: set[str], sentence: str) -> int:
    return len(wanted & {_stem(w) for w in _WORD.findall(sentence.casefold())})


def _cut(text: str) -> str:
    if len(text) <= GIST_CHARS:
        return text
    return text[:GIST_CHARS].rsplit(" ", 1)[0] + "…"


def _best_sentence(text: str, query: str) -> tuple[list[str], list[int], int]:
    """The sentences of `text`, how many telling words of `query` each shares, and which one
    answers best: a statement sharing some before a question sharing more."""
    parts = [part.strip() for part in sentences(clean(text))] or [""]
    wanted = {_stem(w) for w in _telling(query)}
    scores = [_overlap(wanted, part) for part in parts]
    best = max(
        range(len(parts)), key=lambda i: (scores[i] > 0 and not is_question(parts[i]), scores[i])
    )
    return parts, scores, best


def only_asks(text: str, query: str) -> bool:
    """Whether all `text` says about `query` is a question (its best sentence is one)."""
    parts, scores, best = _best_sentence(text, query)
    return scores[best] > 0 and is_question(parts[best])


def gist(text: str, query: str = "") -> str:
    """What of `text` answers `query`, at most GIST_CHARS characters, without its final full
    stop: the sentence sharing the most telling words with it (a statement before a question
    — a question does not answer one) and the statement after it, which often holds what the
    first one only points at ("That race sounds great! Raising awareness for mental health
    …"); the statement before it too when it opens by pointing back ("“Brave” means a lot to
    me. It's about being courageous"); sharing none, the text from its start. A segment often
    holds more than one sentence, and the one asked about need not lead."""
    parts, scores, best = _best_sentence(text, query)
    if scores[best] == 0:
        return _cut(" ".join(parts)).rstrip(" .")
    chosen = parts[best]
    if best > 0 and _POINTS_BACK.match(chosen) and not is_question(parts[best - 1]):
        chosen = f"{parts[best - 1]} {chosen}"
    after = parts[best + 1] if best + 1 < len(parts) else ""
    # "When …?" is answered by the day it was said: the sentence that dates it is enough.
    if _WHEN.match(query.strip()):
        after = ""
    if after and not is_question(after) and len(chosen) + len(after) < GIST_CHARS:
        chosen = f"{chosen} {after}"
    return _cut(chosen).rstrip(" .")


def who(speaker: str | None, owner_speakers: Collection[str]) -> str:
    if not speaker or _ANONYMOUS.match(speaker.strip()):
        return "someone"
    if speaker.strip().casefold() in {s.casefold() for s in owner_speakers}:
        return "you"
    return clean(speaker)[:64]


def pick(memories: Sequence[Memory], query: str = "") -> list[Memory]:
    """The best memory; when all it says about the question is a question, also the next best
    that scores at least half as well (often the answer to it). The same words said twice
    count once."""
    ranked = sorted(memories, key=lambda m: m.score, reverse=True)
    chosen: list[Memory] = []
    seen: set[str] = set()
    for m in ranked:
        key = clean(m.text).casefold()
        if not key or key in seen:
            continue
        if chosen and m.score < chosen[0].score * 0.5:
            break
        seen.add(key)
        chosen.append(m)
        if not only_asks(chosen[0].text, query) or len(chosen) == 2:
            break
    return chosen


_WEEKDAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday|mon|tue|wed|thu|fri|sat|sun"
_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"
_COUNT = r"(?:a|an|one|two|three|four|five|six|a couple of|a few|\d+)"
# Relative dates a sentence may hold, by how precise they are: back from when they were
# said, and ahead ("next month": a plan).
_RELATIVE_DATE = re.compile(
    rf"\b(?P<day>the day before yesterday|yesterday|last night|last (?:{_WEEKDAYS})\b|"
    rf"{_COUNT} days? ago)|(?P<weekend>last weekend)|(?P<week>last week|{_COUNT} weeks? ago)|"
    rf"(?P<month>last month|{_COUNT} months? ago)|(?P<year>last year|{_COUNT} years? ago)|"
    rf"(?P<named>last (?:{_MONTHS}))\b|"
    rf"(?P<ahead_day>tomorrow|the day after tomorrow|in {_COUNT} days?)|"
    rf"(?P<ahead_weekend>this weekend|next weekend)|(?P<ahead_week>next week)|"
    rf"(?P<ahead_month>next month|in {_COUNT} months?)|(?P<ahead_year>next year)",
    re.IGNORECASE,
)


def _day_month_year(day: date) -> str:
    return f"{day.day} {day.strftime('%B')} {day.year}"


def dated(text: str, spoken_at: datetime | None, zone: tzinfo) -> str | None:
    """What a relative date in `text` ("yesterday", "last Friday", "two weeks ago", "last
    year", "last August", "next month", "this weekend") names, given when it was said:
    "7 May 2023", "the week before 9 June 2023", "2022", "August 2022", "September 2023",
    "the weekend after 3 June 2022"; None when it holds none (or it cannot be read)."""
    m = _RELATIVE_DATE.search(text)
    if m is None or spoken_at is None:
        return None
    said_on = _day_month_year(spoken_at.astimezone(zone).date())
    if m["week"] and m["week"].lower() == "last week":
        return f"the week before {said_on}"
    if m["weekend"]:
        return f"the weekend before {said_on}"
    if m["ahead_week"]:
        return f"the week after {said_on}"
    if m["ahead_weekend"]:
        return f"the weekend after {said_on}"
    if m["named"]:  # the last such month before the day it was said
        month = datetime.strptime(m["named"].split()[1], "%B").month
        day = spoken_at.astimezone(zone).date()
        year = day.year if month < day.month else day.year - 1
        return f"{date(year, month, 1).strftime('%B')} {year}"
    ahead = any(m[k] for k in ("ahead_day", "ahead_month", "ahead_year"))
    when = resolve(m.group(0), spoken_at, "future" if ahead else "past")
    if when is None:
        return None
    local = when.astimezone(zone)
    if m["day"] or m["ahead_day"]:
        return _day_month_year(local.date())
    if m["week"]:
        return f"the week of {_day_month_year(local.date())}"
    if m["month"] or m["ahead_month"]:
        return local.strftime("%B %Y")
    return str(local.year)


def sentence(
    memory: Memory, now: datetime, zone: tzinfo, owner_speakers: Collection[str], query: str = ""
) -> str:
    """One memory quoted: who said what of it answers `query`, and when, if the question asks
    when or the words are from the last week ("Yesterday, Priya said: “…”."). An older date
    the question did not ask for is left to the memories listed with the answer: a spoken
    reply stays short."""
    speaker = who(memory.speaker, owner_speakers)
    quoted = gist(memory.text, query)
    said = f"{speaker} said: “{quoted}”."
    asks_when = bool(_WHEN.match(query.strip()))
    if memory.timestamp is None or not (asks_when or _this_week(memory.timestamp, now)):
        return _cap(said)
    day = relative_day(memory.timestamp, now, zone)
    if asks_when and (then := dated(quoted, memory.timestamp, zone)):
        # "When …?": the day the words name first, then when they were said
        return f"{_cap(then)}: {day}, {speaker} said “{quoted}”."
    return f"{_cap(day)}, {said}"


def _this_week(when: datetime, now: datetime) -> bool:
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return now - when < timedelta(days=7)


# --- answers from facts ----------------------------------------------------------------------

# Past tenses a fact's verb needs that "-ed" does not give.
_IRREGULAR_PAST = {
    "is": "was", "are": "were", "has": "had", "drinks": "drank", "eats": "ate",
    "goes": "went", "does": "did", "makes": "made", "buys": "bought", "teaches": "taught",
    "prefers": "preferred", "leaves": "left", "runs": "ran", "swims": "swam",
    "rides": "rode", "sings": "sang", "writes": "wrote", "reads": "read", "knows": "knew",
    "studies": "studied", "plays": "played", "enjoys": "enjoyed", "stays": "stayed",
}  # fmt: skip
# Second person of the verbs that do not just lose their -s.
_IRREGULAR_YOU = {"is": "are", "has": "have", "was": "were", "does": "do", "goes": "go"}
_NOUN_FACT = re.compile(r"^(?P<owner>.+?)['’]s (?P<noun>[\w -]+?) is (?P<other>.+)$")
_WHO_IS = re.compile(r"^who(?:'s| is| was| are)\b", re.IGNORECASE)
# A capitalised word (a possessive 's left out), and quoted titles to skip ("The Four Seasons").
_NAME_WORD = re.compile(r"\b([A-Z][a-z]+(?:-[A-Z][a-z]+)?)(?:['’]s)?\b")
_QUOTED = re.compile(r"\"[^\"]*\"|“[^”]*”|'[^']*'(?!\w)")
# Capitalised words of a question that are not names.
_NOT_NAMES = frozenset(
    "I I'm I've I'd I'll Do Does Did Is Are Was Were What Where When Who Whom Why How Which "
    "Can Could Would Should Will Have Has Had Tell Remind Please Annie The A An My Your "
    "Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April "
    "May June July August September October November December OK Okay Hey Hi Dr Mr Mrs Ms "
    "Mx Prof".split()
)


def _base(verb: str) -> str:
    """The verb a "you" takes: "lives" → "live", "studies" → "study", "is" → "are"."""
    if verb in _IRREGULAR_YOU:
        return _IRREGULAR_YOU[verb]
    if verb.endswith("ies") and len(verb) > 4:
        return verb[:-3] + "y"
    if verb.endswith(("sses", "shes", "ches", "xes", "zes", "oes")):
        return verb[:-2]
    return verb[:-1] if verb.endswith("s") and not verb.endswith("ss") else verb


def past(verb: str) -> str:
    """ "likes" → "liked", "drinks" → "drank", "lives" → "lived", "is" → "was"."""
    if verb in _IRREGULAR_PAST:
        return _IRREGULAR_PAST[verb]
    if not verb.endswith("s") or verb.endswith("ss"):
        return verb  # already past ("moved", "used to") or not a verb
    base = _base(verb)
    return base + "d" if base.endswith("e") else base + "ed"


def _starts_with(text: str, name: str) -> bool:
    return bool(name) and text.casefold().startswith(name.casefold() + " ")


def clause(fact: str, subject: str, *, you: bool, tense: str = "now") -> str:
    """The fact's words as a clause: "Arjun avoids coffee" → "you avoid coffee" (you) or
    "Arjun avoided coffee" (past); "Arjun's spouse is Meera" → "your spouse is Meera"."""
    words = clean(fact)
    noun = _NOUN_FACT.match(words)
    if noun and subject and noun["owner"].casefold() == subject.casefold():
        owner = "your" if you else noun["owner"] + "'s"
        verb = "was" if tense == "past" else "is"
        return f"{owner} {noun['noun']} {verb} {noun['other']}"
    if not _starts_with(words, subject):
        return words
    rest = words[len(subject) + 1 :]
    verb, _, tail = rest.partition(" ")
    if tense == "past":
        verb = past(verb)
    elif you:
        verb = _base(verb)
    who_ = "you" if you else subject
    return " ".join(p for p in (who_, verb, tail) if p)


def inverted(fact: str, asked: Collection[str]) -> str | None:
    """A relation told from its other side when the question is about that side: asked
    about Meera, "Arjun's spouse is Meera" → "Meera is Arjun's spouse"."""
    noun = _NOUN_FACT.match(clean(fact))
    if noun and noun["other"].casefold() in {a.casefold() for a in asked}:
        return f"{noun['other']} is {noun['owner']}'s {noun['noun']}"
    return None


def _since(when: datetime | None, now: datetime, zone: tzinfo) -> str:
    if when is None:
        return ""
    day = relative_day(when, now, zone)
    return f" (since {day.removeprefix('on ')})" if day != "today" else " (since today)"


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def state_fact(
    fact: KnownFact, recall: Recall, *, now: datetime, zone: tzinfo, owners: Collection[str]
) -> str:
    """One or two sentences: the fact, since when, and what it replaced."""
    you = fact.subject.casefold() in {o.casefold() for o in owners}
    asked = [s.name for s in recall.about if not s.owner]
    turned = inverted(fact.fact, asked) if fact.subject not in asked else None
    if turned is not None:
        for owner in owners:  # "Meera is Arjun's spouse" to Arjun: "your spouse"
            turned = re.sub(rf"\b{re.escape(owner)}['’]s\b", "your", turned, flags=re.I)
        said = turned
    else:
        said = clause(fact.fact, fact.subject, you=you)
    text = f"{_cap(said)}{_since(fact.since, now, zone)}."
    before = [
        clause(r.fact, fact.subject, you=you, tense="past")
        for r in fact.replaced[:2]
        if r.fact.strip()
    ]
    if before:
        text += f" Before that, {' and '.join(before)}."
    return text


def _told(text: str, subject: str, owners: Collection[str], *, past_: bool = False) -> str:
    """A statement's words for the listener: the owner's own as "you"."""
    you = subject.casefold() in {o.casefold() for o in owners}
    out = clause(text, subject, you=you, tense="past" if past_ else "now")
    return re.sub(r"\btheir\b", "your", out) if you and out.startswith("you ") else out


def state_statement(
    said: KnownStatement, *, now: datetime, zone: tzinfo, owners: Collection[str]
) -> str:
    """What was said and whether it holds now: "You keep bees on your roof (since 14
    January)."; for one that ended, "Not any more: you have given up rowing (on 11 February).
    Before that, every Saturday you rowed on the river." and what holds instead; a plan not
    yet due, "planned for 2 March"; a plan kept, with the act that kept it."""
    text = _cap(_told(said.text, said.subject, owners))
    if said.current:
        return f"{text}{_since(said.valid_at, now, zone)}."
    if said.kept_by:
        return f"{text}. Done: {_told(said.kept_by, said.subject, owners)}."
    if said.ended_by is None and said.valid_at is not None and said.valid_at > now:
        day = relative_day(said.valid_at, now, zone).removeprefix("on ")
        return f"{text} (planned for {day})."
    if said.ended_by is not None:
        when = f" ({relative_day(said.ended_at, now, zone)})" if said.ended_at else ""
        ended = _told(said.ended_by, said.subject, owners)
        before = _told(said.text, said.subject, owners, past_=True)
        if not _starts_with(before, said.subject):  # "every Saturday Rosa rows ..."
            before = before[:1].lower() + before[1:]
        out = f"Not any more: {ended}{when}. Before that, {before}."
        if said.instead:
            now_text, since = said.instead[0]
            out += f" Now: {_told(now_text, said.subject, owners)}{_since(since, now, zone)}."
        return out
    return f"{text}."


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def about_the_question(fact: KnownFact, query: str, recall: Recall) -> bool:
    """Whether a fact answers what was asked, not only whom it was about: the engine found
    the question's words in it (`relevance`: its own words, or the words its kind is asked by,
    "live" for where someone lives) — or, from an engine that does not say, it shares a word
    with the question other than the names of the people in it ("Do I still drink coffee?"
    and "Arjun drinks tea"); or the question asks who someone is and the fact is a relation."""
    people = [s.name for s in recall.about if s.type == "person" or s.owner]
    names = {w for name in people for w in _WORD.findall(name.casefold())}
    if _WHO_IS.match(query.strip()) and _NOUN_FACT.match(clean(fact.fact)) is not None:
        # "Who is Lina?", not "Who is Melanie a fan of?": nothing asked but the person
        return not (_telling(query) - names - {"who"})
    if fact.relevance is not None:
        return fact.relevance > 0
    names |= {w for w in _WORD.findall(fact.subject.casefold())}
    asked = {_stem(w) for w in _telling(query) if w not in names}
    said = {_stem(w) for w in _WORD.findall(f"{fact.fact} {fact.object}".casefold())}
    return bool(asked & (said - names))


# Questions about what holds now, or whether it still does.
_STILL = re.compile(
    r"\b(?:still|anymore|any more|no longer|nowadays|these days|currently|now)\b", re.IGNORECASE
)
_SECOND_PERSON = re.compile(r"\b(?:you|your|yours|you're|you've|you'll|you'd|ya)\b", re.I)
_FIRST_PERSON = re.compile(
    r"\b(?:I|I'm|I've|I'd|I'll|me|my|mine|myself|we|we're|we've|us|our|ours)\b", re.IGNORECASE
)
# A name called out at the end or the start of a sentence ("…, Mel!", "Jon, …").
_VOCATIVE = re.compile(r",\s*[A-Z][a-z]+[!?.]*$|^[A-Z][a-z]+,")
# Questions about what was said (the words themselves are the answer, whoever they are about).
_ABOUT_WORDS = re.compile(
    r"\b(?:say|said|says|tell|told|ask|asked|suggest|suggested|recommend|recommended|advice|"
    r"advise|advised|think|thought|compliment|complimented)\b",
    re.IGNORECASE,
)


def same_person(name: str, other: str) -> bool:
    """Whether two names are one person's: equal, or one a single word that starts the
    other's first word ("Mel" and "Melanie", "Jo" and "Jo Silva" not: too short to tell)."""
    a, b = (n.strip().casefold().split() or [""] for n in (name, other))
    if a == b:
        return True
    for short, full in ((a, b), (b, a)):
        if len(short) == 1 and len(short[0]) >= 3 and full[0].startswith(short[0]):
            return True
    return False


def whom(memory: Memory, query: str, person: str) -> Literal["asked", "other"] | None:
    """Whom the words of `memory` that answer `query` are about: the asked `person`
    ("asked": the person speaking of themselves, or someone else naming them), someone else
    ("other": the person speaking to someone — "That race sounds great, Mel!", "What got you
    into running?" — or another speaker speaking of themselves — "I ran a charity race"), or
    None when the words do not tell."""
    speaker = (memory.speaker or "").strip()
    if not speaker or _ANONYMOUS.match(speaker):
        return None
    said = gist(memory.text, query)
    first = _FIRST_PERSON.search(said) is not None
    second = _SECOND_PERSON.search(said) is not None
    if same_person(speaker, person):
        vocative = _VOCATIVE.search(said) is not None
        if (second or vocative) and not first:
            return "other"
        return "asked" if first else None
    if any(same_person(w, person) for w in _NAME_WORD.findall(said)):
        return "asked"
    return "other" if first and not second else None


def said_of_someone_else(
    query: str, recall: Recall, chosen: Sequence[Memory]
) -> tuple[str, Memory] | None:
    """The person a question asks about and the memory that says most of what it asks,
    when those words are about someone else: the asked person speaking to another ("What
    got you into running?") or another person speaking of themselves ("I ran a charity
    race"), and no memory saying as much is about the asked person. Their words do not say
    what the asked person did and are not told as theirs. None otherwise (the question is
    about what was said, or names nobody, or several people, or shares no telling word).
    `chosen`: the memories `pick` chose for the question."""
    people = [s.name for s in recall.about if s.type == "person" and not s.owner]
    if len(people) != 1 or _ABOUT_WORDS.search(query) or not recall.memories:
        return None
    person = people[0]
    if len(chosen) == 1 and same_person(chosen[0].speaker or "", person):
        if whom(chosen[0], query, person) == "other":  # the best memory: them, to another
            return person, chosen[0]
    names = {w for s in recall.about for w in _WORD.findall(s.name.casefold())}
    wanted = {_stem(w) for w in _telling(query) - names}
    shared = [_overlap(wanted, gist(m.text, query)) for m in recall.memories]
    most = max(shared)
    if most == 0:
        return None
    best = [m for m, n in zip(recall.memories, shared, strict=True) if n == most]
    told = [whom(m, query, person) for m in best]
    if "asked" in told or "other" not in told:
        return None
    return person, best[told.index("other")]


def unknown_name(query: str, recall: Recall) -> str | None:
    """A name the question asks about that the memory does not know: capitalised, not the
    first word, named by no subject, said in no memory found and the speaker of none."""
    query = _QUOTED.sub(lambda m: " " * len(m.group(0)), query)
    words = query.split()
    for m in _NAME_WORD.finditer(query):
        name = m.group(1)
        if name in _NOT_NAMES or m.start() == 0 or (words and words[0] == name):
            continue
        pattern = re.compile(rf"\b{re.escape(name)}\b", re.IGNORECASE)
        if any(pattern.search(s.name) for s in recall.about):
            continue
        if any(pattern.search(f"{mem.speaker or ''} {mem.text}") for mem in recall.memories):
            continue
        return name
    return None


@dataclass(frozen=True, slots=True)
class Answer:
    """What the responder says, and the facts and memories it said it from."""

    text: str
    facts: tuple[KnownFact, ...] = ()
    memories: tuple[Memory, ...] = ()


def compose(
    query: str,
    recall: Recall,
    *,
    now: datetime,
    zone: tzinfo,
    owner_speakers: Collection[str],
) -> Answer:
    """The answer to `query` from what was recalled: the current fact about what it asks
    (with since when and what it replaced) and at most one quote behind it; without a fact,
    the best one or two memories quoted; without either, that nothing is remembered."""
    shown_query = gist(query)
    owners = [*owner_speakers, *(s.name for s in recall.about if s.owner)]
    relevant = [f for f in recall.facts if about_the_question(f, query, recall)]
    if relevant:
        facts = [relevant[0]]
        second = relevant[1] if len(relevant) > 1 else None
        if second is not None and second.replaced and set(second.sources) & set(facts[0].sources):
            facts.append(second)  # said in the same breath: "tea" with "not coffee"
        lines = [state_fact(f, recall, now=now, zone=zone, owners=owners) for f in facts]
        quotes = [m for f in facts for m in f.sources][:1]
        # the sentence of the source that says the fact (its words, then the question's)
        lines += [sentence(m, now, zone, owners, f"{facts[0].object} {query}") for m in quotes]
        return Answer(" ".join(lines), tuple(facts), tuple(quotes))
    # What was said about someone answers a question about what holds now ("Does she still
    # row?"); other questions are answered from memories: on LoCoMo dev, statements told for
    # every question that shared a word with one took the overall F1 from 14.2 to 6.1.
    told = [x for x in recall.statements if x.relevance > 0] if _STILL.search(query) else []
    if told:
        said = state_statement(told[0], now=now, zone=zone, owners=owners)
        quotes = list(told[0].sources[:1])
        lines = [said, *(sentence(m, now, zone, owners, query) for m in quotes)]
        return Answer(" ".join(lines), (), tuple(quotes))
    best = pick(recall.memories, query)
    name = unknown_name(query, recall) if best else None
    if name is not None:
        return Answer(f"I don't know: nothing is remembered about {name}.")
    if not best:
        return Answer(
            f"I looked through your memories for “{shown_query}” and found nothing about it. "
            f"{LIMITS}"
        )
    if (elsewhere := said_of_someone_else(query, recall, best)) is not None:
        person, closest = elsewhere
        speaker = who(closest.speaker, owners)
        whose = "someone else" if same_person(speaker, person) else "themselves"
        lead = f"I don't know that about {person}; the closest is {speaker} talking about {whose}."
        return Answer(f"{lead} {sentence(closest, now, zone, owners, query)}", (), (closest,))
    lines = [sentence(m, now, zone, owners, query) for m in best]
    if len(best) > 1:
        lines.insert(0, LEAD_MANY)
    return Answer(" ".join(lines), (), tuple(best))


class OfflineMemoryResponder:
    """The `none` backend: memory search turned into sentences, streamed sentence by sentence."""

    name = "none"
    supports_tools = False
    # Sentences it says often, which a voice can synthesise ahead of time.
    phrases = (LEAD_MANY,)

    def __init__(
        self,
        engine: EngineClient,
        *,
        timezone: str = "UTC",
        owner_speakers: Collection[str] = (),
        clock: type[datetime] = datetime,
    ) -> None:
        self.engine = engine
        self.zone: tzinfo = ZoneInfo(timezone)
        self.owner_speakers = tuple(owner_speakers)
        self._clock = clock
        # Searches a voice turn starts from its transcript before the turn ends (ChatService
        # keeps them true to the forget marker).
        self.lookahead: MemoryLookahead[Recall] = MemoryLookahead(self._search)

    async def _search(self, query: str) -> Recall:
        me = self.owner_speakers[0] if self.owner_speakers else None
        return await self.engine.recall(query, limit=SEARCH_LIMIT, me=me)

    async def aclose(self) -> None:
        return None

    async def answer(self, query: str) -> str:
        return (await self.reply(query)).text

    async def reply(self, query: str) -> Answer:
        """The answer and what it was said from."""
        if not query.strip():
            return Answer(f"Ask me about something you talked about. {LIMITS}")
        try:
            found = await self.lookahead.take(query)
            if found is None:
                found = await self._search(query)
        except EngineUnavailableError as exc:
            return Answer(
                f"I couldn't reach your memories just now ({exc.reason}). Without a language "
                "model they're the only thing I can answer from, so please try again in a "
                "moment."
            )
        return compose(
            query,
            found,
            now=self._clock.now(UTC),
            zone=self.zone,
            owner_speakers=self.owner_speakers,
        )

    async def stream(
        self, *, system: str, messages: Sequence[Message], tools: Sequence[Tool]
    ) -> AsyncIterator[StreamEvent]:
        users = [m for m in messages if m.role == "user"]
        query = users[-1].content if users else ""
        answer = await self.reply(query)
        yield MemoryUsed(facts=answer.facts, memories=answer.memories)
        # Sentence by sentence: the whole answer is there at once, and a voice speaks
        # sentences (word-sized pieces only cost frames and data-channel messages).
        for part in sentences(answer.text):
            yield TextDelta(part)
