"""Patterns for what NER does not see: promises, decisions, questions, relationships, habits.

Each pattern carries a confidence that says how often such a match is what it claims (a
first-person "I'll call him tomorrow" is nearly always a promise; "I'll" alone in "I'll be
honest" is not, so bare "I'll" needs an action verb after it). Confidences are on the same
scale as the gates in schema.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from context_engine.extract.schema import (
    EntityType,
    ExtractedEntity,
    ExtractedRelation,
    SegmentText,
)

# Verbs after "I'll"/"I will" that make a commitment rather than a prediction or a filler.
_ACTION = (
    r"(?:call|text|email|send|bring|buy|get|pick|book|pay|fix|finish|check|ask|tell|"
    r"remind|write|meet|visit|come|drop|return|clean|cook|make|do|take|look|sort|order|"
    r"handle|arrange|organi[sz]e|schedule|ring|submit|review|update|share|help)"
)


@dataclass(frozen=True, slots=True)
class _Pattern:
    type: EntityType
    regex: re.Pattern[str]
    confidence: float


def _p(type_: EntityType, pattern: str, confidence: float) -> _Pattern:
    return _Pattern(type_, re.compile(pattern, re.IGNORECASE), confidence)


PATTERNS: tuple[_Pattern, ...] = (
    _p("promise", rf"\b(?:I'll|I will|I'm going to|I am going to)\s+(?:\w+\s+)?{_ACTION}\b"
                  r"[^.?!]*", 0.8),
    _p("promise", r"\bremind me to\b[^.?!]*", 0.85),
    _p("promise", r"\bI promise\b[^.?!]*", 0.9),
    _p("promise", r"\b(?:don't let me forget|I need to remember) to\b[^.?!]*", 0.8),
    _p("decision", r"\b(?:we|I) (?:have |'ve )?decided\b[^.?!]*", 0.85),
    _p("decision", r"\b(?:we're|we are|I'm|I am) going with\b[^.?!]*", 0.8),
    _p("decision", r"\blet's go with\b[^.?!]*", 0.75),
    _p("decision", r"\b(?:we|I) (?:agreed|settled on|chose|picked)\b[^.?!]*", 0.75),
    _p("habit", r"\bI (?:always|usually|never|often)\s+\w+[^.?!]*", 0.7),
    _p("habit", r"\bevery (?:morning|evening|night|day|week|weekend|monday|tuesday|wednesday|"
                r"thursday|friday|saturday|sunday)\b[^.?!]*", 0.7),
)  # fmt: skip

# "?"-terminated sentences that ask something (not tag questions like "right?").
_QUESTION = re.compile(r"[^.?!]*\b(?:who|what|when|where|why|how|which|can|could|should|"
                       r"would|do|does|did|is|are|will)\b[^.?!]*\?", re.IGNORECASE)  # fmt: skip

# Relationship words → the relation's predicate.
RELATIONS: dict[str, str] = {
    "wife": "spouse", "husband": "spouse", "partner": "partner", "spouse": "spouse",
    "girlfriend": "partner", "boyfriend": "partner", "fiancee": "partner", "fiancé": "partner",
    "fiance": "partner", "fiancée": "partner",
    "brother": "sibling", "sister": "sibling", "sibling": "sibling",
    "mother": "parent", "mom": "parent", "mum": "parent", "father": "parent", "dad": "parent",
    "son": "child", "daughter": "child", "kid": "child",
    "friend": "friend", "best friend": "friend", "colleague": "colleague", "boss": "boss",
    "manager": "boss", "coworker": "colleague", "roommate": "roommate", "neighbour": "neighbor",
    "neighbor": "neighbor", "cousin": "cousin", "uncle": "uncle", "aunt": "aunt",
    "grandmother": "grandparent", "grandma": "grandparent", "grandfather": "grandparent",
    "grandpa": "grandparent", "doctor": "doctor", "therapist": "therapist",
}  # fmt: skip
_REL_WORDS = "|".join(sorted((re.escape(w) for w in RELATIONS), key=len, reverse=True))
_NAME = r"([A-Z][a-z]+(?:\s[A-Z][a-z]+)?)"
# "my wife Priya", "my best friend, Ravi", "Priya, my wife", "her brother Arjun"
# (owner and relation words in any case; the name must be capitalised)
_REL_BEFORE = re.compile(rf"\b((?i:my|our|his|her|their))\s+((?i:{_REL_WORDS})),?\s+{_NAME}")
_REL_AFTER = re.compile(rf"{_NAME},\s+((?i:my|our|his|her|their))\s+((?i:{_REL_WORDS}))\b")

_OWNER_WORDS = {"my": "speaker", "our": "speaker"}


def _sentence_of(match: re.Match[str]) -> str:
    return match.group(0).strip(" ,;")


def find_entities(segment: SegmentText) -> Iterator[ExtractedEntity]:
    """Promises, decisions, habits and questions said in one segment."""
    for pattern in PATTERNS:
        for m in pattern.regex.finditer(segment.text):
            said = _sentence_of(m)
            yield ExtractedEntity(
                type=pattern.type,
                name=said[:200],
                confidence=pattern.confidence,
                evidence=said,
                properties={"speaker": segment.speaker},
                segment_id=segment.segment_id,
            )
    for m in _QUESTION.finditer(segment.text):
        asked = m.group(0).strip()
        if len(asked.split()) >= 3:  # "right?", "you know?" are not questions worth keeping
            yield ExtractedEntity(
                type="question",
                name=asked[:200],
                confidence=0.6,
                evidence=asked,
                properties={"speaker": segment.speaker},
                segment_id=segment.segment_id,
            )


def find_relations(segment: SegmentText) -> Iterator[ExtractedRelation]:
    """Person–person relations named in one segment ("my wife Priya" said by Asha gives
    (Asha, spouse, Priya); "her brother Arjun" gives (her, sibling, Arjun) for the caller to
    resolve)."""
    found: list[tuple[str, str, str, str]] = []
    for m in _REL_BEFORE.finditer(segment.text):
        found.append((m.group(1), m.group(2), m.group(3), m.group(0)))
    for m in _REL_AFTER.finditer(segment.text):
        found.append((m.group(2), m.group(3), m.group(1), m.group(0)))
    for owner, word, name, evidence in found:
        subject = segment.speaker if owner.lower() in _OWNER_WORDS else owner.lower()
        yield ExtractedRelation(
            subject=subject,
            predicate=RELATIONS[word.lower()],
            object=name,
            confidence=0.85 if subject == segment.speaker else 0.65,
            evidence=evidence,
            segment_id=segment.segment_id,
        )
