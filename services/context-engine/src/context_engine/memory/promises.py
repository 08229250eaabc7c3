"""Promises: which were kept, found deterministically, and the list the API serves.

A promise is an entity of type "promise" ("I'll call the movers tomorrow morning"). It counts
as kept (`promise_fulfilments`) when a segment spoken after its first mention — by anyone, in
any session but a daily reflection — reports it done. The rule is deliberately conservative:
a promise wrongly marked kept drops out of every reminder, while one missed stays listed and
the user can mark it by hand (`mark_fulfilled`). A sentence reports a promise done when:

1. it is a statement: not a question, and no negation anywhere ("haven't", "not", "forgot",
   "nobody answered": tried is not done);
2. the clause with the verb (clauses split at commas, dashes and "but") has no future or
   modal cue ("I'll", "going to", "need to", "should", "if"): those restate the promise or
   say it is still to do — while "I called the movers, they'll come Friday" still counts;
3. that clause holds the promise's verb in a past form ("called", "bought", "have sent") or a
   completion phrase ("finished", "took care of", "sorted out"), with a plausible doer just
   before it: I/we/he/she/they, the promiser's name, or nothing (a clipped "Called the
   movers."). "The movers called me" names someone else;
4. enough of the promise's content words (light stems, below) follow the verb in that
   clause: all of them when there are one or two, 60 % when more ("I booked the hotel in
   Pune" does not keep "I'll book the train tickets to Pune"). A promise without content
   words ("I'll call him") is never detected: too little to tell one call from another.

Stems are a few suffix rules plus the irregular pasts of common verbs — not a full
lemmatiser, but the same function reads the promise and the later sentence, so both sides
meet on the same stem. PostgreSQL's full-text index preselects the segments that share a
content word with the promise, so detection stays one indexed query per open promise.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any, Literal

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from context_engine.extract.language import IRREGULAR, sentences, stem, talk_stop_words
from context_engine.ingest.session_kinds import NOT_REFLECTION_SQL
from context_engine.observe.recorder import EventRecorder
from her_os_shared.creatures import CreatureName
from her_os_shared.events import EventType
from her_os_shared.logging import get_logger

log = get_logger(__name__)

PromiseStatus = Literal["open", "fulfilled", "all"]
# Segments read per promise when looking for its fulfilment (oldest first).
CANDIDATES_PER_PROMISE = 500
MANUAL_EVIDENCE = "marked kept by hand"
# Sessions `s` that are not daily reflections (daily.py: their device and id prefix). The one
# spelling of the rule in SQL, for this module and daily.py: reflections restate open
# promises (they never fulfil one) and are never a reflection's input.

# --- words ---------------------------------------------------------------------------------

_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"'})
_TOKEN = re.compile(r"[a-z]+(?:'[a-z]+)?")
_CLAUSE = re.compile(r"[,:\u2013\u2014]|\s-\s|\bbut\b", re.IGNORECASE)

# How a promise is introduced; the verb follows (after an optional adverb).
_LEAD = re.compile(
    r"\b(?:i'll|i will|i'm going to|i am going to|i'm gonna|we'll|we will|we're going to|"
    r"remind me to|i promise(?: to| that i'll| i'll| i will| that i will)?|"
    r"don't let me forget to|i need to remember to)\s+",
    re.IGNORECASE,
)
_ADVERBS = frozenset(
    "definitely also just really totally first quickly finally surely go try to actually "
    "personally then still absolutely".split()
)
# The function words of a promise's content: spaCy's stop words less those that carry
# content in talk (extract/language.py), plus these fillers and contractions of talk; "say"
# stays a deed ("I'll say hi to your mum"), and "back", "own" and "up" stay function words
# of a promise ("I'll pay you back", "I'll set it up").
_PROMISE_FILLERS = frozenset(
    "away back bit got having he'll i'd i'll i'm i've it'll it's let let's lot lots maybe ok "
    "okay own shall she'll stuff sure that's theirs they'll thing things up we'll we're "
    "we've yeah yes you'll you're".split()
)
FUNCTION_WORDS = (talk_stop_words() - {"say"}) | _PROMISE_FILLERS
# Words about when, not what: "tomorrow morning" is no part of what was promised.
TIME_WORDS = frozenset(
    "today tonight tomorrow yesterday morning afternoon evening night noon midnight week "
    "weekend month year next later soon asap now first thing o'clock am pm monday tuesday "
    "wednesday thursday friday saturday sunday mon tue wed thu fri sat sun hour hours minute "
    "minutes day days".split()
)
_PAST_OF = {
    base: {past for past, b in IRREGULAR.items() if b == base} for base in IRREGULAR.values()
}
# Completion phrases that stand for any verb ("I took care of the movers").
COMPLETIONS: tuple[tuple[str, ...], ...] = (
    ("took", "care", "of"), ("taken", "care", "of"), ("dealt", "with"), ("sorted", "out"),
    ("sorted",), ("handled",), ("finished",), ("completed",),
)  # fmt: skip
_NEGATIONS = frozenset(
    "not no never nobody nothing none neither nor forgot forget failed unable cannot nope".split()
)
_PENDING = frozenset(
    "will shall should would could might must gonna wanna if unless whether maybe perhaps "
    "hopefully hope plan planning tbd every usually always often".split()
)
_PENDING_BIGRAMS = frozenset(
    ("going to", "need to", "needs to", "have to", "has to", "want to", "wants to", "got to",
     "supposed to", "remember to", "trying to", "try to", "yet to")
)  # fmt: skip
_DOERS = frozenset("i we he she they i've we've he's she's they've".split())


def tokens(text_: str) -> list[str]:
    return _TOKEN.findall(text_.translate(_QUOTES).lower())


def past_forms(verb: str) -> set[str]:
    """Past forms of a base verb: irregular ones, else -ed / -d / -ied / a doubled
    consonant + ed (some are not English words; they simply never match)."""
    verb = verb.lower()
    forms = set(_PAST_OF.get(verb, ()))
    if verb.endswith("e"):
        forms.add(verb + "d")
    elif verb.endswith("y") and len(verb) > 2 and verb[-2] not in "aeiou":
        forms.add(verb[:-1] + "ied")
    else:
        forms.update({verb + "ed", verb + verb[-1] + "ed"})
    return forms


@dataclass(frozen=True, slots=True)
class PromiseWords:
    """What a promise commits to: its verb and the content words of its object."""

    verb: str  # base form as said ("call")
    objects: tuple[str, ...]  # stems, in order ("mover",)
    words: tuple[str, ...]  # the content words as said (for the full-text preselection)

    @property
    def required(self) -> int:
        n = len(self.objects)
        return n if n <= 2 else math.ceil(0.6 * n)


def promise_words(name: str) -> PromiseWords | None:
    """The verb and content words of a promise ("I'll call the movers tomorrow" → call,
    (mover,)); None when it has no content word to check a fulfilment against."""
    said = name.translate(_QUOTES)
    lead = _LEAD.search(said)
    rest = tokens(said[lead.end() :] if lead else said)
    while rest and rest[0] in _ADVERBS:
        rest = rest[1:]
    if not rest or rest[0] in FUNCTION_WORDS or rest[0] in TIME_WORDS:
        return None
    verb, after = rest[0], rest[1:]
    content = [w for w in after if w not in FUNCTION_WORDS and w not in TIME_WORDS and len(w) > 1]
    objects = tuple(dict.fromkeys(stem(w) for w in content))
    if not objects:
        return None
    return PromiseWords(verb, objects, tuple(dict.fromkeys(content)))


def _pending(words: list[str]) -> bool:
    """A future or modal cue: the promise restated or still to do."""
    if any(w in _PENDING or w.endswith("'ll") for w in words):
        return True
    return any(f"{a} {b}" in _PENDING_BIGRAMS for a, b in pairwise(words))


def _verb_at(promise: PromiseWords, words: list[str]) -> list[tuple[int, int]]:
    """(start, end) of each past form of the promise's verb, or completion phrase."""
    pasts = past_forms(promise.verb)
    found = [(i, i + 1) for i, w in enumerate(words) if w in pasts]
    for phrase in COMPLETIONS:
        n = len(phrase)
        found += [
            (i, i + n) for i in range(len(words) - n + 1) if tuple(words[i : i + n]) == phrase
        ]
    return sorted(found)


def _has_doer(before: list[str], promiser: set[str]) -> bool:
    """I/we/he/she/they or the promiser's name among the few words before the verb, or
    nothing but adverbs ("Already called the movers.")."""
    window = before[-4:]
    if any(w in _DOERS or w in promiser for w in window):
        return True
    return all(w in ("already", "just", "finally", "and", "so", "oh", "yeah", "ok", "okay")
               for w in before)  # fmt: skip


def fulfils(promise: PromiseWords, sentence: str, promiser: str | None = None) -> bool:
    """Whether one sentence reports the promise done (the rules in the module docstring).
    A negation anywhere rejects the sentence ("I called the movers but nobody answered");
    the future cue, the doer and the object must be in the clause of the verb, so "I called
    the movers, they'll come Friday" counts and "I called the plumber, the movers are next"
    does not."""
    if sentence.rstrip().endswith("?"):
        return False
    if any(w in _NEGATIONS or w.endswith("n't") for w in tokens(sentence)):
        return False
    names = set(tokens(promiser)) if promiser else set()
    for clause in _CLAUSE.split(sentence):
        words = tokens(clause)
        if not words or _pending(words):
            continue
        for start, end in _verb_at(promise, words):
            if not _has_doer(words[:start], names):
                continue
            after = {stem(w) for w in words[end:]}
            if sum(o in after for o in promise.objects) >= promise.required:
                return True
    return False


def fulfilling_sentence(promise: PromiseWords, text_: str, promiser: str | None) -> str | None:
    """The first sentence of a segment that reports the promise done, if any."""
    for said, _ in sentences(text_.translate(_QUOTES), clauses=True):
        sentence = said.strip()
        if sentence and fulfils(promise, sentence, promiser):
            return sentence
    return None


# --- detection -----------------------------------------------------------------------------

_OPEN_TO_CHECK = text(
    """
    SELECT e.id, e.name, e.first_seen,
           (SELECT coalesce(g.speaker, m.properties->>'speaker')
            FROM entity_mentions m
            LEFT JOIN segments g ON g.session_id = m.session_id AND g.segment_id = m.segment_id
            WHERE m.entity_id = e.id AND m.current
            ORDER BY g.spoken_at NULLS LAST, m.id LIMIT 1) AS speaker
    FROM entities e
    LEFT JOIN promise_fulfilments f ON f.entity_id = e.id
    WHERE e.type = 'promise' AND e.episode_count > 0 AND f.entity_id IS NULL
      AND e.first_seen <= :as_of
    ORDER BY e.id
    """
)
_CANDIDATES = text(
    f"""
    SELECT g.session_id, g.segment_id, g.text, g.spoken_at
    FROM segments g JOIN sessions s ON s.session_id = g.session_id
    WHERE g.replaced_by IS NULL AND g.spoken_at > :after AND g.spoken_at <= :as_of
      AND g.tsv @@ to_tsquery('english', :words)
      AND {NOT_REFLECTION_SQL}
    ORDER BY g.spoken_at, g.session_id, g.segment_id
    LIMIT :limit
    """  # noqa: S608 (the filter is a constant, no input)
)
_INSERT = text(
    """
    INSERT INTO promise_fulfilments
        (entity_id, fulfilled_at, session_id, segment_id, evidence, detected_at)
    VALUES (:entity_id, :fulfilled_at, :session_id, :segment_id, :evidence, now())
    ON CONFLICT (entity_id) DO NOTHING
    """
)


async def update_fulfilments(
    engine: AsyncEngine,
    *,
    as_of: datetime,
    recorder: EventRecorder | None = None,
) -> int:
    """Look for the fulfilment of every open promise first said by `as_of`, among segments
    spoken after its first mention and by `as_of`; store each found (idempotent: a promise
    already kept is never looked at again). Returns how many were newly found kept."""
    found = 0
    async with engine.connect() as conn:
        promises = (await conn.execute(_OPEN_TO_CHECK, {"as_of": as_of})).all()
    for p in promises:
        words = promise_words(p.name)
        if words is None:
            continue
        # Only plain letters reach to_tsquery: its syntax characters never come from speech.
        query = " | ".join(w for w in words.words if re.fullmatch(r"[a-z]+", w))
        if not query:
            continue
        async with engine.begin() as conn:
            rows = await conn.execute(
                _CANDIDATES,
                {"after": p.first_seen, "as_of": as_of, "words": query,
                 "limit": CANDIDATES_PER_PROMISE},
            )  # fmt: skip
            for seg in rows:
                sentence = fulfilling_sentence(words, seg.text, p.speaker)
                if sentence is None:
                    continue
                inserted = await conn.execute(
                    _INSERT,
                    {"entity_id": p.id, "fulfilled_at": seg.spoken_at,
                     "session_id": seg.session_id, "segment_id": seg.segment_id,
                     "evidence": sentence[:1000]},
                )  # fmt: skip
                found += inserted.rowcount or 0
                log.info("promises.fulfilled", entity_id=p.id, promise=p.name[:120],
                         session_id=seg.session_id, segment_id=seg.segment_id)  # fmt: skip
                break
    if recorder is not None:
        await recorder.emit(
            CreatureName.PHOENIX,
            EventType.COMPLETE,
            data={"task": "promise_fulfilments", "checked": len(promises), "fulfilled": found,
                  "as_of": as_of.isoformat()},
            reasoning="a later segment reported these promises done",
        )  # fmt: skip
    return found


# --- reads and the manual mark --------------------------------------------------------------

_PROMISES = """
    SELECT e.id, e.name, e.first_seen, e.last_seen,
           fm.session_id, fm.segment_id, fm.evidence, fm.speaker, fm.said_at,
           f.fulfilled_at, f.session_id AS f_session_id, f.segment_id AS f_segment_id,
           f.evidence AS f_evidence, f.detected_at AS f_detected_at
    FROM entities e
    LEFT JOIN promise_fulfilments f ON f.entity_id = e.id
    LEFT JOIN LATERAL (
        SELECT m.session_id, m.segment_id, m.evidence,
               coalesce(g.speaker, m.properties->>'speaker') AS speaker,
               coalesce(g.spoken_at, s.started_at) AS said_at
        FROM entity_mentions m
        LEFT JOIN segments g ON g.session_id = m.session_id AND g.segment_id = m.segment_id
        LEFT JOIN sessions s ON s.session_id = m.session_id
        WHERE m.entity_id = e.id AND m.current
        ORDER BY coalesce(g.spoken_at, s.started_at) NULLS LAST, m.id LIMIT 1
    ) fm ON true
    WHERE e.type = 'promise' AND {where}
"""
_COUNT = """
    SELECT count(*) FROM entities e LEFT JOIN promise_fulfilments f ON f.entity_id = e.id
    WHERE e.type = 'promise' AND {where}
"""
_STATUS_WHERE: dict[str, str] = {
    "open": "e.episode_count > 0 AND f.entity_id IS NULL",
    "fulfilled": "e.episode_count > 0 AND f.entity_id IS NOT NULL",
    "all": "e.episode_count > 0",
}


def _item(r: Any) -> dict[str, Any]:
    kept = r.fulfilled_at is not None
    return {
        "id": r.id,
        "name": r.name,
        "evidence": r.evidence or r.name,
        "speaker": r.speaker,
        "first_said_at": r.said_at or r.first_seen,
        "session_id": r.session_id,
        "segment_id": r.segment_id,
        "last_said_at": r.last_seen,
        "status": "fulfilled" if kept else "open",
        "fulfilled_at": r.fulfilled_at,
        "fulfilled_by": None if not kept else "manual" if r.f_session_id == "" else "detected",
        "fulfilment_evidence": r.f_evidence if kept else None,
        "fulfilment_session_id": (r.f_session_id or None) if kept else None,
        "fulfilment_segment_id": r.f_segment_id if kept else None,
    }


async def list_promises(
    conn: AsyncConnection, *, status: PromiseStatus = "open", limit: int = 50, offset: int = 0
) -> tuple[list[dict[str, Any]], int]:
    """Promises with a current mention, most recently first said first."""
    where = _STATUS_WHERE[status]
    total = (await conn.execute(text(_COUNT.format(where=where)))).scalar()
    rows = await conn.execute(
        text(_PROMISES.format(where=where) + " ORDER BY e.first_seen DESC, e.id DESC"
             " LIMIT :limit OFFSET :offset"),
        {"limit": limit, "offset": offset},
    )  # fmt: skip
    return [_item(r) for r in rows], int(total or 0)


async def get_promise(conn: AsyncConnection, entity_id: int) -> dict[str, Any] | None:
    """One promise (with or without current mentions), or None if no such promise."""
    row = (
        await conn.execute(text(_PROMISES.format(where="e.id = :id")), {"id": entity_id})
    ).one_or_none()
    return None if row is None else _item(row)


async def mark_fulfilled(
    engine: AsyncEngine, entity_id: int, *, now: datetime | None = None
) -> tuple[dict[str, Any] | None, bool]:
    """Mark a promise kept by hand, now. Returns (the promise, whether this call marked it);
    a promise already kept (detected or by hand) is left as it is. (None, False): no such
    promise."""
    async with engine.begin() as conn:
        exists = (
            await conn.execute(
                text("SELECT 1 FROM entities WHERE id = :id AND type = 'promise' FOR UPDATE"),
                {"id": entity_id},
            )
        ).scalar()
        if exists is None:
            return None, False
        # session_id '' says "by hand": no real session has an empty id.
        inserted = await conn.execute(
            _INSERT,
            {"entity_id": entity_id, "fulfilled_at": now or datetime.now(UTC), "session_id": "",
             "segment_id": None, "evidence": MANUAL_EVIDENCE},
        )  # fmt: skip
        item = await get_promise(conn, entity_id)
    return item, bool(inserted.rowcount)


def _as_of(item: dict[str, Any], end: datetime) -> dict[str, Any]:
    """The promise as it stood at `end`: a fulfilment after it was not known yet."""
    if item["fulfilled_at"] is not None and item["fulfilled_at"] >= end:
        item.update(status="open", fulfilled_at=None, fulfilled_by=None,
                    fulfilment_evidence=None, fulfilment_session_id=None,
                    fulfilment_segment_id=None)  # fmt: skip
    return item


async def promises_for_day(
    conn: AsyncConnection, *, start: datetime, end: datetime, open_limit: int = 10
) -> dict[str, Any]:
    """Promises as a daily reflection sees them, as of the day's end: made that day (first
    said in [start, end)), kept that day, and still open at its end (first said before it,
    not kept by then; the most recently made first, `open_limit` of them)."""
    made_where = "e.episode_count > 0 AND e.first_seen >= :start AND e.first_seen < :end"
    kept_where = "f.fulfilled_at >= :start AND f.fulfilled_at < :end"
    open_where = (
        "e.episode_count > 0 AND e.first_seen < :end"
        " AND (f.entity_id IS NULL OR f.fulfilled_at >= :end)"
    )
    params = {"start": start, "end": end}
    made = await conn.execute(
        text(_PROMISES.format(where=made_where) + " ORDER BY e.first_seen, e.id"), params
    )
    kept = await conn.execute(
        text(_PROMISES.format(where=kept_where) + " ORDER BY f.fulfilled_at, e.id"), params
    )
    still_open = await conn.execute(
        text(_PROMISES.format(where=open_where) + " ORDER BY e.first_seen DESC, e.id DESC"),
        params,
    )
    open_items = [_as_of(_item(r), end) for r in still_open]
    return {
        "made": [_as_of(_item(r), end) for r in made],
        "kept": [_item(r) for r in kept],
        "open": open_items[:open_limit],
        "open_total": len(open_items),
        "open_ids": [i["id"] for i in open_items],
    }
