"""The JSONL transcript payload: one line of `data/transcripts/{session_id}.jsonl`.

The audio pipeline (and wearable webhooks) write it; the context engine reads it. The JSONL
files are the source of truth from which every other store can be rebuilt.
"""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from her_os_shared import SCHEMA_VERSION
from her_os_shared.ids import SafeId, SegmentId
from her_os_shared.jsonl import JsonlReader, stream_path

MAX_TEXT_CHARS = 100_000
MAX_SEGMENTS_PER_PAYLOAD = 10_000
# Times every store can hold: the keyword index keeps nanosecond timestamps (years 1677–2262),
# so a session outside these years could be written but never indexed (a retry loop).
EARLIEST_YEAR, LATEST_YEAR = 1900, 2200
MAX_OFFSET_S = 10_000_000.0  # a segment's start or end in its session: about 115 days


def reject_lone_surrogates(value: object) -> object:
    # Lone UTF-16 surrogates cannot be written as UTF-8: refuse them with a clear reason
    # (pydantic's own message would only say "unable to parse raw data").
    if not isinstance(value, str):
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"contains an unpaired surrogate at position {exc.start} (not valid Unicode text)"
        ) from None
    return value


class _Contract(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Emotion(_Contract):
    """Speech emotion of a segment. `engine` says what produced it (e.g. "heuristic")."""

    label: str = Field(min_length=1, max_length=32, pattern=r"^[a-z_]+$")
    score: float = Field(ge=0.0, le=1.0)
    engine: str | None = Field(default=None, min_length=1, max_length=64)


MAX_OVERLAPS_PER_SEGMENT = 64


class Overlap(_Contract):
    """Another voice talking at the same time as a segment's speaker (seconds from session
    start, within the segment)."""

    speaker: str = Field(min_length=1, max_length=128)
    start: float = Field(ge=0.0, le=MAX_OFFSET_S)
    end: float = Field(ge=0.0, le=MAX_OFFSET_S)

    _speaker_is_unicode = field_validator("speaker", mode="before")(reject_lone_surrogates)

    @model_validator(mode="after")
    def _end_after_start(self) -> Overlap:
        _check_span(self.start, self.end)
        return self


def _check_span(start: float, end: float) -> None:
    if end < start:
        raise ValueError(f"end ({end}) must not be before start ({start})")
    if not (math.isfinite(start) and math.isfinite(end)):
        raise ValueError("start and end must be finite")


class Segment(_Contract):
    """One stretch of speech by one speaker. Times are seconds from session start."""

    segment_id: SegmentId
    speaker: str = Field(min_length=1, max_length=128)
    text: str = Field(max_length=MAX_TEXT_CHARS)
    start: float = Field(ge=0.0, le=MAX_OFFSET_S)
    end: float = Field(ge=0.0, le=MAX_OFFSET_S)
    language: str | None = Field(
        default=None, pattern=r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$", max_length=16
    )
    stt_engine: str = Field(min_length=1, max_length=64)
    emotion: Emotion | None = None
    pinned: bool = False
    # Overlapped speech: who else talked during the segment, and when (ADR 0025). Left out
    # of the JSON line when nobody did, so such lines keep the design's format.
    overlap: list[Overlap] = Field(
        default_factory=list, max_length=MAX_OVERLAPS_PER_SEGMENT, exclude_if=lambda v: not v
    )

    _text_is_unicode = field_validator("text", "speaker", mode="before")(reject_lone_surrogates)

    @model_validator(mode="after")
    def _end_after_start(self) -> Segment:
        _check_span(self.start, self.end)
        return self


class TranscriptPayload(_Contract):
    """One JSONL line: a batch of segments of one session."""

    schema_version: Literal[1] = SCHEMA_VERSION
    session_id: SafeId
    device_id: SafeId
    session_started_at: AwareDatetime
    is_sweep: bool = False
    segments: list[Segment] = Field(max_length=MAX_SEGMENTS_PER_PAYLOAD)

    @field_validator("session_started_at")
    @classmethod
    def _storable_time(cls, value: datetime) -> datetime:
        if not EARLIEST_YEAR <= value.year <= LATEST_YEAR:
            raise ValueError(f"must lie between the years {EARLIEST_YEAR} and {LATEST_YEAR}")
        return value

    @model_validator(mode="after")
    def _unique_segment_ids(self) -> TranscriptPayload:
        seen: set[str] = set()
        for seg in self.segments:
            if seg.segment_id in seen:
                raise ValueError(f"segment_id {seg.segment_id!r} appears twice in one payload")
            seen.add(seg.segment_id)
        return self


def recorded_start(transcripts_dir: Path, session_id: str) -> datetime | None:
    """When a session began, as its transcript file's first valid line says (None: no file,
    or no valid line yet)."""
    path = stream_path(transcripts_dir, session_id)
    if not path.is_file():
        return None
    for record in JsonlReader(path, TranscriptPayload):
        return record.value.session_started_at
    return None
