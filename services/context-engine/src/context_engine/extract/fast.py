"""The fast extractor: spaCy NER, patterns and VADER — no LLM, the embedded default.

What it finds in a session's segments (in spoken order):
- people, places, organisations and events from the bundled spaCy model's NER (PERSON →
  person; GPE, LOC, FAC → place; ORG → organization; EVENT → event); people also from the
  speakers' labels when they are names ("Priya", not "SPEAKER_00" or "user"), from names
  addressed ("Hey Gina!") and from relation patterns ("my wife Priya");
- events anchored to a date ("the wedding on Saturday", "my job interview next week");
- promises, decisions, habits and questions (patterns.py); DATE and TIME spans in the same
  sentence become their `when`;
- relations between people ("my wife Priya" → (speaker, spouse, Priya); "her brother Arjun"
  → (the person mentioned last, sibling, Arjun), dropped when nobody was; "your sister Amy" →
  (the previous speaker, sibling, Amy)) and preferences ((speaker, likes | avoids, thing));
  brands keep their category ("my Nike running shoes" → likes and owns Nike, category shoe);
- since version 2, facts read from the dependency parse (statements.py): where people live and
  move, work, study and what they switched, started, stopped, drink and use, with the dates
  their words name resolved against the time they were spoken (her_os_shared.dates). The
  parser runs only on segments whose words may state such a fact (_PARSE_CUES): about as slow
  as NER, it would otherwise halve the throughput; since version 3 a capitalised subject the
  tagger did not take for a name ("Tara lives in Chennai", Tara read as an adjective) is one
  when the session named that person before (a relation, NER, a speaker);
- since version 4, statements (clauses.py): every declarative clause about a person, in the
  third person with names, with its predicate, object, kind (fact, plan, habit, ended, opinion)
  and date; every turn of three words or more is parsed (the attribute ruler applied by lookup
  keeps that near the old speed, spacy_model.faster_attribute_ruler);
- topics: the things those facts are about ("coffee", "pottery", "Hoka") become `topic`
  entities, so they can be counted, validated, contradicted and tiered like the rest;
- emotions from VADER's sentiment score (emotion.py), when a word names the feeling ("sad",
  "thrilled"): a bare positive or negative score is politeness more often than a feeling.

Every entity carries the segment it was said in and the speaker; NER entities also their spaCy
label. The output goes through `schema.finalise` (gates, dedup, linking). Confidences are
measured precisions, so the gates mean the same as for the LLM extractor (PERSON_CONFIDENCE).

The work is CPU-bound: `extract` runs `extract_sync` in a worker thread. The model is loaded
once per process (spacy_model.get_nlp, hashes checked first).
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from context_engine.extract import predicates
from context_engine.extract.base import Extraction
from context_engine.extract.clauses import Context, Statement, Turn, closing_question, read_clauses
from context_engine.extract.emotion import emotion_of, names_a_feeling
from context_engine.extract.language import sentence_bounds, singular
from context_engine.extract.patterns import (
    MAX_EVIDENCE,
    NOT_NAMES,
    find_dialogue_relations,
    find_entity_spans,
    find_preferences,
    find_relations,
    find_vocatives,
    normalise_text,
    not_a_name,
    relation_mentions,
    sentence_at,
    sentence_index,
)
from context_engine.extract.schema import (
    CONFIDENCE_GATES,
    EntityType,
    ExtractedEntity,
    ExtractedRelation,
    SegmentText,
    finalise,
    is_placeholder_speaker,
)
from context_engine.extract.spacy_model import PARSE_COMPONENTS, get_nlp
from context_engine.extract.statements import (
    ACTIVITIES,
    DRINKS,
    PETS,
    PRAISE,
    ROLES,
    SPORTS,
    Speech,
    statements,
)
from her_os_shared.dates import iso_day, resolve, warm_up

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc, Span

VERSION = 4
_NLP_LOCK = threading.Lock()
MAX_CHARS = 10_000  # per segment: longer text is cut (NER cost grows with it)
BATCH_SIZE = 64

LABELS: dict[str, EntityType] = {
    "PERSON": "person",
    "GPE": "place",
    "LOC": "place",
    "FAC": "place",
    "ORG": "organization",
    "EVENT": "event",
}
DATE_LABELS = frozenset({"DATE", "TIME"})

# Confidence of a person candidate = the share of such candidates that are people, measured
# on DialogRE dev by bench/extract/extract_quality.py (its "Calibration" table, 2026-11-22),
# rounded to 0.05. A candidate counts as right when it is, case-insensitively and as whole
# words, part of a PER argument of the split's relations or has one as part ("Joey" ~ "Joey
# Tribbiani"). That gold lists only the people some relation is about, so the shares are lower
# bounds: of the 40 "wrong" names the benchmark prints, about three in four are people all the
# same (Tim, Hilda, Charlton Heston; the rest titles like "Blue Velvet" and words like "Calm").
# The gate (0.6) keeps capitalised names and drops lower-case and all-caps spans, which in
# conversation are mostly interjections and guesses.
PERSON_CONFIDENCE: dict[str, float] = {
    "multi": 0.75,  # two to four capitalised words: "Joey Tribbiani" (0.77 of 149)
    "single": 0.85,  # one capitalised word: "Estelle" (0.86 of 511 said once in the dialogue)
    "caps": 0.25,  # ALL CAPS: "JOEY" (1 seen: taken as "lower")
    "lower": 0.25,  # any lower-case word: "hun", "pheebs" (0.25 of 20)
}
# One capitalised word said more than once in the session (0.94 of 568).
PERSON_REPEATED_CONFIDENCE = 0.95
# A name addressed after a greeting or at the end of a sentence ("Hey Gina!", "Thanks,
# Nate.", "That's great, Gina!"): patterns.find_vocatives (0.88 of 177).
VOCATIVE_CONFIDENCE = 0.9
# A name in a relation pattern ("my wife Priya": 0.96 of 24).
RELATION_NAME_CONFIDENCE = 0.95
# A one-word GPE/ORG span where a person's name stands — addressed at the start of a sentence
# ("Phoebe, what's wrong?", "Maria!") or introduced ("this is Phoebe", "my name is Tag") — is
# read as a person: the small model labels some first names as places or organisations. Hand-
# checked on DialogRE and LoCoMo dev: 24 of 28 such spans were people (not: "Insane!",
# "Sucker!", "Italy vs. China").
ADDRESSED_CONFIDENCE = 0.85
# A speaker label that is a name was given by enrolment or the user: nearly always right.
SPEAKER_CONFIDENCE = 0.9
# A PERSON span right after "in", "near" or "went/moved/flew... to" ("I went to Woodhaven")
# is read as a place: the small model tags unfamiliar town names as people.
PLACE_CUE_CONFIDENCE = 0.6  # too rare to measure: 1 in the samples below ("Woodhaven", right)
# Places, organisations and events: the small model's labels are much less reliable in
# conversation than on its news-like training data (OntoNotes precision GPE 0.91, ORG 0.79):
# on DialogRE it tags a friend's name as a country ("Phoebe!" → GPE) and shouted words as
# organisations ("MONSTER!"). Confidence therefore depends on the span's shape and on the
# words before it. Each value is the share judged right (by one reader, 2026-11-22) in a
# random sample of the spans of that kind from DialogRE dev and LoCoMo dev together (most of
# the spans are DialogRE's), rounded to 0.05; n = spans judged.
PLACE_CONFIDENCE: dict[str, float] = {
    "cue": 0.9,  # GPE/LOC/FAC after "in", "near", "visited", "went to"...: 26 of 29
    "multi": 0.75,  # GPE of two or more capitalised words, no cue: "New York", 6 of 8
    "caps": 0.1,  # GPE in capitals, no cue: "GO, GO, GO!", "OW" (0 of 5; "UK" has cues)
    "single": 0.35,  # GPE of one word, no cue: 7 of 20 ("Phoebe!", "Phoebe, what's wrong?")
    "LOC": 0.7,  # LOC, no cue: "the Grand Canyon", "Earth" vs "Insane!", 7 of 10
    "FAC": 0.4,  # FAC, no cue: "Eiffel Tower" vs "an I Hate Rachel club", 3 of 7
}
ORG_CONFIDENCE: dict[str, float] = {
    "keyword": 0.85,  # an organisation word in it: "Peace Corps", "New School" (5 of 5)
    "multi": 0.35,  # other multi-word ORG: titles, characters ("Kermit The Frog"): 3 of 15
    "caps": 0.1,  # "ATM", "MONTH", "FYI": 1 of 20
    "single": 0.2,  # "Nike" and "TikTok", but mostly names and words ("Carol", "Dance"): 4 of 20
}
EVENT_CONFIDENCE = 0.6  # "Thanksgiving", "Pride Month": 5 of 5, too few to trust more
_ORG_WORDS = frozenset(
    "inc inc. corp corp. corporation company co co. ltd llc plc bank university college school "
    "academy institute hospital clinic club studios studio group foundation association council "
    "agency department ministry church airlines airways society channel center centre corps "
    "committee league federation union network press times news magazine museum library "
    "restaurant cafe café bakery shelter gym".split()
)
# An event noun right before a date ("party tonight", "a dance competition next month"):
# 27 of 30 judged right in a sample from both datasets (not: "game all day", "show for my day").
DATED_EVENT_CONFIDENCE = 0.85

_SPEAKER_NAME = re.compile(
    r"^[A-Z][a-z]+(?:[-'][A-Z]?[a-z]+)*(?: [A-Z][a-z]+(?:[-'][A-Z]?[a-z]+)*){0,2}$"
)
_NAME_TOKEN = re.compile(r"^[A-Za-z][A-Za-z'.-]*$")
# Words before a place: "in Spain", "visited Rome", "been to Paris", "a trip last week to
# Rome", "my home country, Sweden", "the city of Pune".
_PLACE_CONTEXT = re.compile(
    r"(?:\b(?:in|near|around|across|throughout|visit|visits|visited|visiting|explore|"
    r"explored|exploring)|\b(?:went|go|goes|going|gone|been|moved|move|moving|flew|fly|"
    r"flying|drove|travel(?:l)?ed|travel|travel(?:l)?ing|headed|heading|relocated|relocating|"
    r"back|way|came|come|coming|off|return|returned|returning)(?:\s+\w+ly|\s+only|\s+just)?"
    r"\s+to|\btrip\b[^.?!]{0,25}?\bto|\b(?:country|city|town|state|village|island|capital|"
    r"province|region|county|hometown),?(?:\s+of)?)\s+(?:the\s+)?$",
    re.IGNORECASE,
)
# The stricter cue that makes a PERSON span a place ("I went to Woodhaven"): not "visited"
# or "came to", which people are too ("visited Monica").
_PLACE_CUE = re.compile(
    r"(?:\b(?:in|near)|\b(?:went|go|goes|going|gone|been|moved|move|moving|flew|fly|flying|"
    r"drove|travel(?:l)?ed|travel|travel(?:l)?ing|trip|headed|heading|relocated|relocating)"
    r"\s+to|\b(?:country|city|town|state|village|island|hometown),?(?:\s+of)?)"
    r"\s+(?:the\s+)?$",
    re.IGNORECASE,
)
_PLACE_LABELS = frozenset({"GPE", "LOC", "FAC"})
# Nouns that make the name before them a place ("the Jayanagar market", "Indiranagar metro").
_PLACE_HEADS = frozenset(
    "market road street station metro mall park cafe café lake beach temple airport "
    "neighbourhood neighborhood area layout junction circle bazaar flyover suburb".split()
)
# Hand-checked: the small model tags unfamiliar neighbourhoods as people; a place noun after
# the name settles it (too rare in the dev sets to measure; set at the place-cue level).
PLACE_HEAD_CONFIDENCE = 0.75
_INTRODUCED = re.compile(r"(?:\bmy name is|\bmy name's|\bthis is|\bmeet|\bnamed|\bcalled)\s+$",
                         re.IGNORECASE)  # fmt: skip


def addressed_or_introduced(doc: Doc, ent: Span) -> bool:
    """A one-word capitalised span that starts a sentence and is followed by "," or "!"
    ("Phoebe, what's wrong?", "Maria!"), or follows "this is", "meet", "my name is"."""
    name = ent.text
    if " " in name or not name[:1].isupper() or name.isupper() or not_a_name(name):
        return False
    before = doc.text[: ent.start_char]
    if _INTRODUCED.search(before[-30:]):
        return True
    initial = not before.strip() or before.rstrip()[-1] in ".!?"
    return initial and doc.text[ent.end_char : ent.end_char + 1] in (",", "!")


def place_cued(doc: Doc, ent: Span, *, strict: bool = False) -> bool:
    """Whether a span stands where a place does: after a place cue (above), or in a
    "City, Country" pair with another place span ("Edinburgh, Scotland")."""
    before = doc.text[max(0, ent.start_char - 40) : ent.start_char]
    if (_PLACE_CUE if strict else _PLACE_CONTEXT).search(before):
        return True
    if strict:
        return False
    if ent.text.isupper():  # "GO, GO, GO!" is not a city and its country
        return False
    for other in doc.ents:
        if other.label_ in _PLACE_LABELS and other.start_char != ent.start_char:
            between = (doc.text[ent.end_char : other.start_char]
                       if other.start_char >= ent.end_char
                       else doc.text[other.end_char : ent.start_char])  # fmt: skip
            if between.strip() == ",":
                return True
    return False


_EVENT_NOUNS = (
    "wedding|party|birthday|anniversary|concert|meeting|interview|appointment|trip|vacation|"
    "game|match|exam|conference|funeral|ceremony|graduation|dinner|lunch|brunch|recital|"
    "tournament|festival|gig|reunion|shower|surgery|presentation|launch|race|marathon|"
    "competition|audition|premiere|exhibition|workshop|class|session|checkup|check-up|"
    "hearing|date|performance|show|celebration|playdate|sleepover|retreat|camp"
)
_EVENT_MODIFIERS = (
    "job|dentist|doctor's|doctor|team|birthday|dinner|family|work|school|graduation|"
    "engagement|baby|bachelor|bachelorette|farewell|retirement|book|board|staff|"
    "parent-teacher|dance|piano|art|yoga|soccer|football|basketball|baseball|tennis|"
    "chess|poetry|music|charity|road|camping|business|club|company|office|holiday|christmas"
)
_DATED_EVENT = re.compile(
    rf"\b(?:(?P<owner>[A-Z][a-z]+'s|my|our|his|her|their|the|a|an|your)\s+)?"
    rf"(?:(?P<mod>{_EVENT_MODIFIERS})\s+)?(?P<noun>{_EVENT_NOUNS})\b",
    re.IGNORECASE,
)
# Between an event noun and its date: nothing, or a preposition ("the wedding on Saturday").
_EVENT_GAP = re.compile(r"^\s*,?\s*(?:(?:is|was|'s|will be)\s+)?(?:on|at|in|this|next|for)?\s*$")


def looks_like_name(speaker: str) -> bool:
    """A speaker label that is a person's name ("Priya", "Asha Rao", or "priya" as some
    clients write labels), not a diarization label ("SPEAKER_00", "Speaker 1") or a role
    ("user", "unknown")."""
    s = speaker.strip()
    if s.islower() and s.replace(" ", "").isalpha():
        s = s.title()
    return bool(_SPEAKER_NAME.match(s)) and not is_placeholder_speaker(s) and s not in NOT_NAMES


def speaker_display_name(speaker: str) -> str:
    """The person entity's name of a speaker label: "priya" → "Priya" (same canonical name)."""
    s = " ".join(speaker.split())
    return s.title() if s.islower() else s


# A segment is parsed only when its words may state what statements.py reads: each cue is a
# verb or noun of a rule with the word that makes it a fact ("moved to", "works at", "gave me").
# Broad cues ("from", "made", "moving", "amazing") matched 70 % of LoCoMo's turns and halved
# the extractor's speed; these match about a third.
_ROLE_WORDS = "|".join(re.escape(w) for w in sorted(ROLES, key=len, reverse=True))
_PET_WORDS = "|".join(re.escape(w) for w in sorted(PETS, key=len, reverse=True))
_PRAISE_WORDS = "|".join(re.escape(w) for w in sorted(PRAISE, key=len, reverse=True))
_PARSE_CUES = re.compile(
    r"\b(?:"
    r"liv(?:e|es|ed|ing)\s+(?:\w+\s+)?in|resid\w*|relocat\w*|"
    r"mov(?:e|es|ed|ing)\s+(?:\w+\s+)?(?:to|from|back|out|away|in)|"
    r"(?:am|'m|is|'s|are|was|were|come|comes|came|originally)\s+from|"
    r"gr[eo]w(?:ing)?\s+up|born\s+in|"
    r"work(?:s|ed|ing)?\s+(?:\w+\s+)?(?:at|for|as|with)|jobs?|join(?:s|ed|ing)?|quit\w*|"
    r"left|leav(?:e|es|ing)|resign\w*|stud(?:y|ies|ied|ying)|graduat\w*|"
    r"stop(?:s|ped|ping)?|start(?:s|ed|ing)?|beg[au]n|began|(?:took|take|takes|taking)\s+up|"
    r"play(?:s|ed|ing)?|dr[iau]nk(?:s|ing)?|switch\w*|chang(?:e|ed|es|ing)\s+(?:\w+\s+)?(?:to|from)|"
    r"replac\w*|swap\w*|(?:g[ia]v(?:e|es|ing)|mak(?:e|es|ing)|made)\s+me|marr\w*|divorc\w*|"
    rf"(?:a|an)\s+(?:\w+\s+)?(?:{_ROLE_WORDS})|{_PET_WORDS}|"
    rf"(?:these|this|my|our)\s+[A-Z]\w+\s+\w+\s+(?:is|are)\s+(?:\w+\s+)?(?:{_PRAISE_WORDS})"
    r")\b",
    re.IGNORECASE,
)
# Recurring concepts said in passing ("we went camping again", "my pottery class") are topics
# too, so they are counted and tiered although no fact names them: the drinks, sports and
# hobbies statements.py knows, less words that are as often something else ("running late",
# "reading the email", "pool", "bridge", "table", "water").
_TOPIC_WORDS = sorted(
    (DRINKS | SPORTS | ACTIVITIES)
    - set(
        "water table bridge pool video games running walking reading writing lifting "
        "meditating squash drums coke".split()
    ),
    key=len,
    reverse=True,
)
_TOPIC_MENTION = re.compile(rf"\b({'|'.join(re.escape(w) for w in _TOPIC_WORDS)})\b", re.IGNORECASE)
# Below relation topics (0.7): a word said, not a fact about it; above the topic gate (0.5).
TOPIC_MENTION_CONFIDENCE = 0.55

# Confidence of an entity named as a fact's object ("works at Infosys" → Infosys, organisation)
# — the words around it say what it is, which NER's label for one capitalised word does not.
OBJECT_ENTITY_CONFIDENCE = 0.8
TOPIC_CONFIDENCE = 0.7
# A relation below this is not kept (a guessed "he/she" subject with a weak rule).
RELATION_GATE = 0.5


def person_shape(name: str) -> str:
    """The key of PERSON_CONFIDENCE: "multi", "single", "caps" or "lower"."""
    words = name.split()
    if any(w[:1].islower() for w in words):
        return "lower"
    if any(len(w) > 1 and w.isupper() for w in words):
        return "caps"
    return "multi" if len(words) > 1 else "single"


def _words_of(text: str) -> list[str]:
    words = [w.strip('.,!?;:"()[]{}*_~`') for w in text.replace("\n", " ").split()]
    words = [w for w in words if w]
    if words:  # possessive: "Joey's" → "Joey", "the Joneses'" → "the Joneses"
        last = words[-1]
        if last.endswith("'s"):
            words[-1] = last[:-2]
        elif last.endswith("s'"):
            words[-1] = last[:-1]
    return [w for w in words if w]


def clean_name(text: str) -> str | None:
    """A PERSON span as a name: punctuation, a possessive "'s" and leading or trailing words
    that are not names ("Hey Joey", "Uncle Joey", "Mr. Geller" → "Joey", "Joey", "Geller")
    removed; None when nothing name-like is left."""
    words = _words_of(text)
    while words and not_a_name(words[0]):
        words = words[1:]
    while words and not_a_name(words[-1]):
        words = words[:-1]
    if not words or len(words) > 4 or not all(_NAME_TOKEN.match(w) for w in words):
        return None
    return " ".join(words)


def clean_thing(text: str) -> str | None:
    """A place, organisation or event span as a name: punctuation, a possessive and a leading
    "the" removed ("the Grand Canyon's" → "Grand Canyon")."""
    words = _words_of(text)
    if words and words[0].lower() == "the":
        words = words[1:]
    if not words or len(words) > 6 or not any(c.isalpha() for c in "".join(words)):
        return None
    return " ".join(words)


@dataclass
class _Session:
    """What the extractor remembers across one session's segments."""

    entities: list[ExtractedEntity] = field(default_factory=list)
    relations: list[ExtractedRelation] = field(default_factory=list)
    single_names: Counter[str] = field(default_factory=Counter)
    speakers: set[str] = field(default_factory=set)
    last_person: str | None = None
    previous_speaker: str | None = None
    addressee: str | None = None
    # the session's speakers when there are exactly two: each one's "you" is the other
    pair: tuple[str, str] | None = None
    # people named so far (_known_people), and how many entities / relations it has read
    known: set[str] = field(default_factory=set)
    known_read: tuple[int, int] = (0, 0)
    # what the clauses said (clauses.py) and what their pronouns may point back to
    statements: list[Statement] = field(default_factory=list)
    context: Context = field(default_factory=Context)


def _known_people(session: _Session, people: Sequence[tuple[int, str]]) -> frozenset[str]:
    """The people named so far in the session: person entities, the people of person–person
    relations ("your sister Tara"), the named speakers, and this segment's own. Read
    incrementally: only what was added since the last call."""
    seen_entities, seen_relations = session.known_read
    names = session.known
    names.update(e.name for e in session.entities[seen_entities:] if e.type == "person")
    for r in session.relations[seen_relations:]:
        if (p := predicates.spec(r.predicate)) is not None and p.noun:
            names.update((r.subject, r.object))
    session.known_read = (len(session.entities), len(session.relations))
    speakers = {s for s in session.speakers if looks_like_name(s)}
    here = {name for _, name in people}
    return frozenset(n for n in names | speakers | here if n and not is_placeholder_speaker(n))


class _Mentions:
    """What one turn names, added as entities with their evidence sentence (`add(...)`), and
    the people among them: who "her"/"his" may refer to (`people`: offset, name) and who is
    spoken to, so who "your" is (`spoken_to`)."""

    def __init__(self, session: _Session, seg: SegmentText, bounds: list[tuple[int, int]]) -> None:
        self.session = session
        self.seg = seg
        self.bounds = bounds
        self.people: list[tuple[int, str]] = []
        self.spoken_to: list[str] = []

    def __call__(
        self, type_: EntityType, name: str, confidence: float, offset: int, **properties: Any
    ) -> None:
        seg = self.seg
        evidence = sentence_at(seg.text, offset, self.bounds)
        properties = {"speaker": seg.speaker, **properties}
        self.session.entities.append(
            ExtractedEntity(type_, name, confidence, evidence, properties,
                            segment_id=seg.segment_id)
        )  # fmt: skip
        # someone addressed is "you", not "her": not a referent for a pronoun
        addressed = properties.get("source") in ("vocative", "addressed")
        if type_ == "person" and confidence >= CONFIDENCE_GATES["person"] and not addressed:
            self.people.append((offset, name))
        elif type_ == "person" and addressed:
            self.spoken_to.append(name)


def _take_turn(session: _Session, seg: SegmentText) -> None:
    """Whose turn it is: the one who spoke before is now spoken to, and a speaker with a
    name is a person."""
    if session.previous_speaker is not None and session.previous_speaker != seg.speaker:
        session.addressee = session.previous_speaker
    session.previous_speaker = seg.speaker
    speaker = seg.speaker.strip()
    if speaker not in session.speakers and looks_like_name(speaker):
        session.speakers.add(speaker)
        session.entities.append(
            ExtractedEntity("person", speaker_display_name(speaker), SPEAKER_CONFIDENCE,
                            properties={"speaker": speaker, "source": "speaker"},
                            segment_id=seg.segment_id)
        )  # fmt: skip


def _said_items(session: _Session, seg: SegmentText, add: _Mentions, dates: Sequence[Span]) -> None:
    """What the turn says in set shapes: promises and decisions (with when they are due),
    questions and the like, topics of the lexicon, and events with their dates."""
    for entity, start, end in find_entity_spans(seg):
        if entity.type in ("promise", "decision") and (
            when := _when(start, end, dates, add.bounds, seg.text)
        ):
            extra: dict[str, Any] = {"when": when}
            if due := resolve(when, seg.spoken_at, "future"):
                extra["due"] = iso_day(due)
            entity = replace(entity, properties={**entity.properties, **extra})
        session.entities.append(entity)
    for m in _TOPIC_MENTION.finditer(seg.text):
        add("topic", m.group(1).lower(), TOPIC_MENTION_CONFIDENCE, m.start(), source="lexicon")
    for event in _dated_events(seg, dates):
        if on := resolve(str(event.properties.get("when", "")), seg.spoken_at):
            event = replace(event, properties={**event.properties, "date": iso_day(on)})
        session.entities.append(event)


def _who_you_are(session: _Session, seg: SegmentText, spoken_to: list[str]) -> str | None:
    """Who "you" and "your" are in this turn: someone it addresses by name, else the one who
    spoke before, else (two speakers) the other one when that one has a name."""
    addressee = session.addressee if session.addressee != seg.speaker else None
    if addressee is None and session.pair is not None:
        other = next((p for p in session.pair if p != seg.speaker.strip()), None)
        # "you" is the other party only when that party has a name: a diarization label
        # is stable within one session only (ADR 0017)
        addressee = other if other and looks_like_name(other) else None
    if not spoken_to and (named := _SENTENCE_START_NAME.match(seg.text)):
        # "Arjun, your sister…": a session's speaker addressed by name
        labels = {p.casefold(): p for p in session.pair or ()}
        if named.group(1).casefold() in labels:
            spoken_to.append(labels[named.group(1).casefold()])
    return spoken_to[0] if spoken_to else addressee


class FastExtractor:
    """spaCy NER + patterns + VADER; see the module docstring. `extract_sync` is the same work
    without the thread (benchmarks, tests); `extract_raw` is it before gates and dedup."""

    name = "fast"
    version = VERSION

    def __init__(
        self,
        nlp: Language | None = None,
        *,
        batch_size: int = BATCH_SIZE,
        max_chars: int = MAX_CHARS,
        emotions: bool = True,
    ) -> None:
        self._nlp = nlp
        self.batch_size = batch_size
        self.max_chars = max_chars
        self.emotions = emotions

    @property
    def label(self) -> str:
        return f"{self.name}@{self.version}"

    @property
    def nlp(self) -> Language:
        if self._nlp is None:
            self._nlp = get_nlp()
        return self._nlp

    def load(self) -> None:
        """Load the model (hashes checked) and VADER now instead of on the first session."""
        from context_engine.extract.emotion import analyzer

        _ = self.nlp
        analyzer()
        warm_up()

    async def extract(self, segments: Sequence[SegmentText]) -> Extraction:
        return await asyncio.to_thread(self.extract_sync, list(segments))

    def extract_sync(self, segments: Sequence[SegmentText]) -> Extraction:
        """Entities (after gates, dedup and linking) and relations said in the segments."""
        segs = self._prepare(segments)
        raw = self._extract(segs)
        return Extraction(
            entities=finalise(raw.entities, segs),
            relations=raw.relations,
            statements=raw.statements,
        )

    def extract_raw(self, segments: Sequence[SegmentText]) -> Extraction:
        """Everything found, before gates and dedup (what calibration looks at)."""
        return self._extract(self._prepare(segments))

    def _prepare(self, segments: Sequence[SegmentText]) -> list[SegmentText]:
        return [
            SegmentText(
                s.segment_id, s.speaker, normalise_text(s.text[: self.max_chars]), s.spoken_at
            )
            for s in segments
        ]

    def _parse(self, segs: list[SegmentText]) -> list[Doc]:
        """Every segment through NER; those with a fact cue also through the parser."""
        nlp = self.nlp
        cued = [i for i, s in enumerate(segs) if _worth_parsing(s.text)]
        plain = sorted(set(range(len(segs))) - set(cued))
        docs: dict[int, Doc] = {}
        with _NLP_LOCK:  # spaCy adds new words to the shared vocabulary: one caller at a time
            # component_names, not pipe_names: the latter omits what another caller disabled
            parse_parts = [c for c in PARSE_COMPONENTS if c in nlp.component_names]
            texts = (segs[i].text for i in cued)
            docs.update(zip(cued, nlp.pipe(texts, batch_size=self.batch_size), strict=True))
            with nlp.select_pipes(disable=parse_parts):
                texts = (segs[i].text for i in plain)
                docs.update(zip(plain, nlp.pipe(texts, batch_size=self.batch_size), strict=True))
        return [docs[i] for i in range(len(segs))]

    def _extract(self, segs: list[SegmentText]) -> Extraction:
        session = _Session()
        labels = sorted({s.speaker.strip() for s in segs if s.speaker.strip()})
        if len(labels) == 2:
            session.pair = (labels[0], labels[1])
        for seg, doc in zip(segs, self._parse(segs), strict=True):
            self._segment(session, seg, doc)
        entities = [_repeat_bonus(e, session.single_names) for e in session.entities]
        speakers = {s.segment_id: s.speaker for s in segs}
        relations = [r for r in _unique(session.relations) if r.confidence >= RELATION_GATE]
        entities.extend(_object_entities(relations, speakers))
        return Extraction(
            entities=_resolve_types(entities), relations=relations, statements=session.statements
        )

    def _segment(self, session: _Session, seg: SegmentText, doc: Doc) -> None:
        """One turn, in its named steps: whose turn it is, what it names, what it says in
        set shapes, who "you" is in it, then the facts and the feeling it states."""
        _take_turn(session, seg)
        if not seg.text.strip():
            return
        mentions = _Mentions(session, seg, sentence_bounds(seg.text))
        dates = [e for e in doc.ents if e.label_ in DATE_LABELS]
        self._names(session, seg, doc, mentions, dates)
        _said_items(session, seg, mentions, dates)
        people = sorted(mentions.people)
        you = _who_you_are(session, seg, mentions.spoken_to)
        self._relations(session, seg, doc, people, you)
        _clauses(session, seg, doc, people, you)
        if (
            self.emotions
            and names_a_feeling(seg.text)
            and (emotion := emotion_of(seg))
            and emotion.name not in _GENERIC
        ):
            session.entities.append(emotion)
        if people:
            session.last_person = people[-1][1]

    def _names(
        self,
        session: _Session,
        seg: SegmentText,
        doc: Doc,
        add: _Mentions,
        dates: Sequence[Span],
    ) -> None:
        """The people, places, organisations, events and dates the turn names (NER), the
        people it addresses (vocatives) and the people its relation words name."""
        not_people = [(e.start_char, e.end_char) for e in doc.ents if e.label_ != "PERSON"]
        for ent in doc.ents:
            kind = LABELS.get(ent.label_)
            if kind == "person":
                self._person(session, doc, ent, add)
            elif (
                kind in ("place", "organization")
                and addressed_or_introduced(doc, ent)
                and (not place_cued(doc, ent))
            ):
                add("person", ent.text, ADDRESSED_CONFIDENCE, ent.start_char, label=ent.label_,
                    source="addressed")  # fmt: skip
            elif kind is not None and (name := clean_thing(ent.text)):
                when = (
                    _when(ent.start_char, ent.end_char, dates, add.bounds, seg.text)
                    if kind == "event"
                    else None
                )
                cued = kind == "place" and place_cued(doc, ent)
                confidence = _thing_confidence(ent, name, cued)
                extra = {"when": when} if when else {"cue": True} if cued else {}
                add(kind, name, confidence, ent.start_char, label=ent.label_, **extra)
        for v in find_vocatives(seg.text):
            # "my home country, Sweden." reads like "great, Gina!": trust NER's other labels
            if v.greeted or not any(s <= v.offset < e for s, e in not_people):
                add("person", v.name, VOCATIVE_CONFIDENCE, v.offset, source="vocative")
        for r in relation_mentions(seg.text):
            add("person", r.object, RELATION_NAME_CONFIDENCE, r.object_start, source="relation")

    @staticmethod
    def _relations(
        session: _Session,
        seg: SegmentText,
        doc: Doc,
        people: list[tuple[int, str]],
        you: str | None,
    ) -> None:
        """What the turn states: relationships ("my sister Tara"), what is said to someone,
        preferences, and (parsed turns) the facts of its clauses."""
        session.relations.extend(
            find_relations(
                seg,
                people=people,
                previous_person=session.last_person,
                addressee=you,
            )
        )
        session.relations.extend(
            find_dialogue_relations(
                seg,
                addressee=you,
                last_person=people[-1][1] if people else session.last_person,
            )
        )
        for r in find_preferences(seg):
            session.relations.extend(_with_brand(r, seg.text))
        if doc.has_annotation("DEP"):
            speech = Speech(
                speaker=seg.speaker.strip(),
                segment_id=seg.segment_id,
                addressee=you,
                last_person=session.last_person,
                spoken_at=seg.spoken_at,
                people=tuple(people),
                known=_known_people(session, people),
            )
            session.relations.extend(statements(doc, speech))

    @staticmethod
    def _person(session: _Session, doc: Doc, ent: Span, add: Any) -> None:
        name = clean_name(ent.text)
        if name is None:
            return
        possessive = doc.text[ent.end_char : ent.end_char + 2] == "'s"
        after = doc.text[ent.end_char : ent.end_char + 20].split()
        if after and after[0].lower().strip(".,!?") in _PLACE_HEADS:
            # "the Jayanagar market", "a Koramangala cafe": a name before a place noun
            add("place", name, PLACE_HEAD_CONFIDENCE, ent.start_char, label=ent.label_, cue=True)
            return
        if " " not in name and not possessive and place_cued(doc, ent, strict=True):
            add("place", name, PLACE_CUE_CONFIDENCE, ent.start_char, label=ent.label_, cue=True)
            return
        shape = person_shape(name)
        if shape == "single":
            session.single_names[name.casefold()] += 1
        add("person", name, PERSON_CONFIDENCE[shape], ent.start_char, label=ent.label_,
            shape=shape)  # fmt: skip


def _worth_parsing(text: str) -> bool:
    """Whether a turn may state something: a cue of statements.py's rules, or any clause of
    three words or more (clauses.py reads every clause; "Thanks!" and "Wow, nice!" state
    nothing)."""
    return bool(_PARSE_CUES.search(text)) or len(text.split()) >= 3


def _clauses(
    session: _Session,
    seg: SegmentText,
    doc: Doc,
    people: list[tuple[int, str]],
    you: str | None,
) -> None:
    """The statements of a parsed turn (clauses.py), then what later turns' pronouns and a
    "Yes" may point back to: the people and places it named, its closing question."""
    ctx = session.context
    ctx.speakers = frozenset(session.speakers)
    places = [(e.start_char, name) for e in doc.ents if e.label_ in _PLACE_LABELS
              and (name := clean_thing(e.text))]  # fmt: skip
    if doc.has_annotation("DEP"):
        turn = Turn(
            speaker=seg.speaker.strip(),
            segment_id=seg.segment_id,
            addressee=you,
            spoken_at=seg.spoken_at,
            people=tuple(people),
            places=tuple(places),
            known=_known_people(session, people),
            context=ctx,
        )
        session.statements.extend(read_clauses(doc, turn))
    named = [name for _, name in people]
    if named and doc.has_annotation("DEP"):  # "Greta and Marit": Marit too, whatever NER says
        firsts = {n.split()[0] for n in named}
        named += [t.text for t in doc if t.dep_ == "conj" and t.pos_ == "PROPN"
                  and t.head.text in firsts and t.text[:1].isupper()]  # fmt: skip
    if named:
        ctx.recent_people = tuple(dict.fromkeys(named))
    if places:
        ctx.recent_places = tuple(dict.fromkeys(name for _, name in places))
    question = closing_question(doc) if doc.has_annotation("DEP") else None
    ctx.question = question
    ctx.question_speaker = seg.speaker.strip() if question is not None else None
    ctx.question_you = you if question is not None else None


def _thing_confidence(ent: Span, name: str, cued: bool) -> float:
    """Confidence of a place, organisation or event span by its label, shape and the words
    before it (PLACE_CONFIDENCE, ORG_CONFIDENCE)."""
    words = name.split()
    capitalised = [w for w in words if w[:1].isupper() or w[:1].isdigit()]
    if not capitalised or (len(words) == 1 and not_a_name(words[0])):
        return 0.0  # "kinda", "y'know", "Whoo", "Honey"
    caps = len(words) == 1 and len(name) > 1 and name.isupper()
    shape = "caps" if caps else "multi" if len(capitalised) > 1 else "single"
    if ent.label_ == "EVENT":
        return EVENT_CONFIDENCE
    if ent.label_ == "ORG":
        if any(w.lower() in _ORG_WORDS for w in words):
            return ORG_CONFIDENCE["keyword"]
        return ORG_CONFIDENCE[shape]
    if cued:
        return PLACE_CONFIDENCE["cue"]
    if ent.label_ in ("LOC", "FAC"):
        return PLACE_CONFIDENCE[ent.label_]
    return PLACE_CONFIDENCE[shape]


def _repeat_bonus(e: ExtractedEntity, single_names: Counter[str]) -> ExtractedEntity:
    """A one-word NER name said more than once in the session is surer (the said-again share
    is higher): PERSON_REPEATED_CONFIDENCE."""
    if e.properties.get("shape") == "single" and single_names[e.name.casefold()] > 1:
        return replace(e, confidence=max(e.confidence, PERSON_REPEATED_CONFIDENCE))
    return e


def _resolve_types(entities: list[ExtractedEntity]) -> list[ExtractedEntity]:
    """One type per name in a session, where the small model's labels disagree: a person
    addressed, named in a relation or speaking ("Hey Gina!") is a person, so NER place,
    organisation and event spans of that name go; a name said where a place stands ("went to
    Woodhaven") is a place, so NER person spans of it go; any other name tagged PERSON
    (gated) is a person, and other NER spans of it without a place cue go."""
    sure = {e.name.casefold() for e in entities if e.type == "person"
            and e.properties.get("source") in ("speaker", "vocative", "relation",
                                               "addressed")}  # fmt: skip
    places = {e.name.casefold() for e in entities
              if e.type == "place" and e.properties.get("cue")} - sure  # fmt: skip
    people = sure | {e.name.casefold() for e in entities if e.type == "person"
                     and e.confidence >= CONFIDENCE_GATES["person"]} - places  # fmt: skip
    kept = []
    for e in entities:
        key, ner = e.name.casefold(), bool(e.properties.get("label"))
        if ner and e.type == "person" and key in places:
            continue
        if (
            ner
            and e.type != "person"
            and (key in sure or (key in people and not e.properties.get("cue")))
        ):
            continue
        kept.append(e)
    return kept


_SENTENCE_START_NAME = re.compile(r"^\s*([A-Z][a-z]+),")
# Emotions VADER names only by sign: mostly politeness and greetings, not a feeling to remember.
_GENERIC = frozenset({"positive", "negative"})
_BRAND = re.compile(r"^((?:[A-Z][\w'&-]*\s+){1,2})([a-z][\w-]*(?:\s+[a-z][\w-]*){0,2})$")


def _with_brand(rel: ExtractedRelation, text: str) -> list[ExtractedRelation]:
    """ "I love my Nike running shoes": the object is the brand (Nike), its category the thing
    (shoe), so "I switched from Nike" and "these Hoka shoes" speak of the same slot; "my"
    before it says the speaker owns one too."""
    at = text.lower().find(rel.object)
    if at < 0:
        return [rel]
    said = text[at : at + len(rel.object)]
    m = _BRAND.match(said)
    if m is None or any(not_a_name(w) for w in m.group(1).split()):
        return [rel]
    properties = {**rel.properties, "category": singular(m.group(2).split()[-1])}
    branded = replace(rel, object=m.group(1).strip(), properties=properties)
    out = [branded]
    if rel.predicate == "likes" and text[:at].rstrip().lower().endswith(("my", "our")):
        out.append(replace(branded, predicate="owns"))
    return out


def _object_entities(
    relations: list[ExtractedRelation], speakers: dict[str, str]
) -> list[ExtractedEntity]:
    """Entities for what facts are about: a place, organisation or person object by its
    predicate's object type; anything else (coffee, tennis, Hoka, a pet) a topic."""
    found: list[ExtractedEntity] = []
    for r in relations:
        if is_placeholder_speaker(r.object):
            continue  # "you're my friend" said to SPEAKER_01: no entity named after a label
        spec = predicates.spec(r.predicate)
        kind = spec.object_type if spec is not None else "topic"
        if kind not in ("person", "place", "organization", "topic"):
            kind = "topic"
        confidence = TOPIC_CONFIDENCE if kind == "topic" else OBJECT_ENTITY_CONFIDENCE
        properties: dict[str, Any] = {
            "speaker": speakers.get(r.segment_id or "", ""),
            "source": "relation",
            "predicate": r.predicate,
        }
        if category := r.properties.get("category"):
            properties["category"] = category
        found.append(
            ExtractedEntity(
                kind,
                r.object,
                min(confidence, r.confidence + 0.1),
                r.evidence,
                properties,
                segment_id=r.segment_id,
            )
        )
    return found


def _unique(relations: list[ExtractedRelation]) -> list[ExtractedRelation]:
    """One relation per (subject, predicate, object), the most confident, first-seen order."""
    best: dict[tuple[str, str, str], ExtractedRelation] = {}
    for r in relations:
        key = (r.subject.casefold(), r.predicate, r.object.casefold())
        if key not in best or r.confidence > best[key].confidence:
            best[key] = r
    return list(best.values())


def _when(
    start: int, end: int, dates: list[Span], bounds: list[tuple[int, int]], text: str
) -> str | None:
    """The first DATE/TIME said in [start, end), else in its sentence; spans only spaces apart
    are one ("tomorrow" "morning" → "tomorrow morning")."""
    inside = [d for d in dates if d.start_char >= start and d.end_char <= end]
    if not inside and bounds:
        i = sentence_index(start, bounds)
        inside = [d for d in dates if sentence_index(d.start_char, bounds) == i]
    if not inside:
        return None
    first, last = inside[0], inside[0]
    for d in inside[1:]:
        if text[last.end_char : d.start_char].strip():
            break
        last = d
    return text[first.start_char : last.end_char]


def _dated_events(seg: SegmentText, dates: list[Span]) -> list[ExtractedEntity]:
    """ "the wedding on Saturday", "my job interview next week": an event noun right before a
    DATE/TIME span (at most a preposition between)."""
    found: list[ExtractedEntity] = []
    text = seg.text
    for m in _DATED_EVENT.finditer(text):
        after = [d for d in dates if d.start_char >= m.end() and d.start_char - m.end() <= 12]
        date = next((d for d in after if _EVENT_GAP.match(text[m.end() : d.start_char])), None)
        if date is None:
            continue
        owner = m.group("owner") or ""
        named = owner.endswith("'s") and owner[0].isupper() and not not_a_name(owner[:-2])
        words = [owner] if named else []
        if m.group("mod"):
            words.append(m.group("mod").lower())
        words.append(m.group("noun").lower())
        found.append(
            ExtractedEntity(
                "event",
                " ".join(words),
                DATED_EVENT_CONFIDENCE,
                evidence=" ".join(text[m.start() : date.end_char].split())[:MAX_EVIDENCE],
                properties={"speaker": seg.speaker, "when": date.text, "source": "dated"},
                segment_id=seg.segment_id,
            )
        )
    return found
