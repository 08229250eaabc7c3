"""What an extractor is: a name, a version and `extract(segments) -> Extraction`.

The name and version label everything it produces (entity_mentions.extractor, the extraction
stage's idempotency key): a new version re-extracts every session and replaces that version's
output, while what earlier versions produced stays in history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from context_engine.extract.clauses import Statement
from context_engine.extract.schema import ExtractedEntity, ExtractedRelation, SegmentText


@dataclass(slots=True)
class Extraction:
    """One extractor's output for one session: entities after gates, dedup and linking
    (schema.finalise), the relations between them, and the statements its clauses make about
    people (clauses.py: the fast extractor's; empty from extractors that read none)."""

    entities: list[ExtractedEntity] = field(default_factory=list)
    relations: list[ExtractedRelation] = field(default_factory=list)
    statements: list[Statement] = field(default_factory=list)


class Extractor(Protocol):
    name: str  # "fast", "llm"
    version: int

    @property
    def label(self) -> str:
        """`{name}@{version}` — written on every mention it produces."""
        ...

    async def extract(self, segments: Sequence[SegmentText]) -> Extraction:
        """Entities and relations said in a session's segments (in spoken order)."""
        ...
