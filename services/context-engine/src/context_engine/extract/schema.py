"""The extraction vocabulary and the rules all extractors' output goes through.

Nine entity types (ADR 0007 lists why these): people, places and organisations are things the
memory is about; events, promises, decisions, questions, habits and emotions are what happens
between them. Each type has a confidence gate: an entity below its type's gate is dropped, so an
extractor's confidences must be calibrated to mean the same thing (the LLM extractor's are the
model's own; the fast extractor's are set from measured precision).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

EntityType = Literal[
    "person", "place", "organization", "event", "promise", "decision", "question", "habit",
    "emotion", "topic",
]  # fmt: skip
ENTITY_TYPES: tuple[EntityType, ...] = (
    "person", "place", "organization", "event", "promise", "decision", "question", "habit",
    "emotion", "topic",
)  # fmt: skip
Sensitivity = Literal["open", "private", "sensitive"]

# Minimum confidence per type. Commitments (promises, decisions) are acted upon — reminders,
# reflections — so a false one costs more than a missed one: their gates are the highest.
CONFIDENCE_GATES: dict[EntityType, float] = {
    "person": 0.6,
    "place": 0.6,
    "organization": 0.6,
    "event": 0.55,
    "promise": 0.7,
    "decision": 0.7,
    "question": 0.5,
    "habit": 0.65,
    "emotion": 0.5,
    "topic": 0.5,  # the design's gate: a recurring concept ("coffee", "pottery")
}

_WORD = re.compile(r"[\w']+", re.UNICODE)


@dataclass(frozen=True, slots=True)
class SegmentText:
    """The part of a segment an extractor reads."""

    segment_id: str
    speaker: str
    text: str
    # when the words were said: relative dates ("last week", "by Sunday") resolve against it
    spoken_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ExtractedEntity:
    type: EntityType
    name: str
    confidence: float
    evidence: str = ""
    properties: dict[str, Any] = field(default_factory=dict)
    sensitivity: Sensitivity = "open"
    segment_id: str | None = None

    @property
    def key(self) -> tuple[str, str]:
        return self.type, canonical_name(self.name)


@dataclass(frozen=True, slots=True)
class ExtractedRelation:
    """A fact between two entities, e.g. (Asha, spouse, Priya).

    `properties` carries what the graph needs beyond the triple (docs/adr/0017):
    - "category": the class the object is a member of, for single-valued slots per category
      ("running shoes" for Nike/Hoka: (Rajesh, uses, Hoka, category "shoe") ends
      (Rajesh, uses, Nike, category "shoe"));
    - "when": the words that dated it ("last week"), "valid_from": the ISO date they resolve to
      against the time the words were spoken (graph valid_at), "due": an ISO date a promise or
      plan is for;
    - "source": which rule found it.
    """

    subject: str
    predicate: str
    object: str
    confidence: float
    evidence: str = ""
    segment_id: str | None = None
    properties: dict[str, Any] = field(default_factory=dict, compare=False)


# Speaker labels that name nobody: diarization labels and roles ("SPEAKER_00", "Speaker 1",
# "unknown_2", "user"). They are stable within one session only.
_PLACEHOLDER_SPEAKER = re.compile(
    r"^(?:speaker[\s_-]*\w*|spk[\s_-]*\w*|unknown[\s_-]*\w*|user|me|you|guest|someone|person|"
    r"other|agent|assistant|system|host|interviewer|narrator)$",
    re.IGNORECASE,
)


def is_placeholder_speaker(label: str) -> bool:
    """A speaker label that is not a person's name ("SPEAKER_00", "unknown_1", "user")."""
    return bool(_PLACEHOLDER_SPEAKER.match(label.strip()))


def canonical_name(name: str) -> str:
    """Case-folded, whitespace-collapsed: (type, canonical_name) identifies an entity."""
    return " ".join(name.split()).casefold()


def passes_gate(entity: ExtractedEntity) -> bool:
    return entity.confidence >= CONFIDENCE_GATES[entity.type]


def dedup(entities: Iterable[ExtractedEntity]) -> list[ExtractedEntity]:
    """One entity per (type, case-folded name): the most confident, in first-seen order."""
    best: dict[tuple[str, str], ExtractedEntity] = {}
    for e in entities:
        old = best.get(e.key)
        if old is None or e.confidence > old.confidence:
            best[e.key] = e  # a dict keeps the key's first position when its value changes
    return list(best.values())


def _words(text: str) -> set[str]:
    return {w.casefold() for w in _WORD.findall(text)}


def best_segment(evidence: str, segments: Sequence[SegmentText]) -> str | None:
    """The segment sharing the most words with the evidence (the first on a tie), or None."""
    want = _words(evidence)
    if not want or not segments:
        return None
    scored = [(len(want & _words(s.text)), -i, s.segment_id) for i, s in enumerate(segments)]
    overlap, _, segment_id = max(scored)
    return segment_id if overlap else None


def link(
    entities: Iterable[ExtractedEntity], segments: Sequence[SegmentText]
) -> list[ExtractedEntity]:
    """Give each entity without a segment its best segment by word overlap with its evidence
    (or its name when it has no evidence)."""
    return [
        e if e.segment_id else replace(e, segment_id=best_segment(e.evidence or e.name, segments))
        for e in entities
    ]


def finalise(
    entities: Iterable[ExtractedEntity], segments: Sequence[SegmentText]
) -> list[ExtractedEntity]:
    """Gates, then dedup, then linking: what every extractor's output goes through."""
    return link(dedup([e for e in entities if passes_gate(e)]), segments)
