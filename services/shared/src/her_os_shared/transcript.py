"""The JSONL transcript payload: one line of `data/transcripts/{session_id}.jsonl`.

The audio pipeline (and wearable webhooks) write it; the context engine reads it. The JSONL
files are the source of truth from which every other store can be rebuilt.
"""

from __future__ import annotations

import math
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

MAX_TEXT_CHARS = 100_000
MAX_SEGMENTS_PER_PAYLOAD = 10_000


def _reject_lone_surrogates(value: object) -> object:
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


class Segment(_Contract):
    """One stretch of speech by one speaker. Times are seconds from session start."""

    segment_id: SegmentId
    speaker: str = Field(min_length=1, max_length=128)
    text: str = Field(max_length=MAX_TEXT_CHARS)
    start: float = Field(ge=0.0)
    end: float = Field(ge=0.0)
    language: str | None = Field(
        default=None, pattern=r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$", max_length=16
    )
    stt_engine: str = Field(min_length=1, max_length=64)
    emotion: Emotion | None = None
    pinned: bool = False

    _text_is_unicode = field_validator("text", "speaker", mode="before")(_reject_lone_surrogates)

    @model_validator(mode="after")
    def _end_after_start(self) -> Segment:
        if self.end < self.start:
            raise ValueError(f"end ({self.end}) must not be before start ({self.start})")
        if not (math.isfinite(self.start) and math.isfinite(self.end)):
            raise ValueError("start and end must be finite")
        return self


class TranscriptPayload(_Contract):
    """One JSONL line: a batch of segments of one session."""

    schema_version: Literal[1] = SCHEMA_VERSION
    session_id: SafeId
    device_id: SafeId
    session_started_at: AwareDatetime
    is_sweep: bool = False
    segments: list[Segment] = Field(max_length=MAX_SEGMENTS_PER_PAYLOAD)

    @model_validator(mode="after")
    def _unique_segment_ids(self) -> TranscriptPayload:
        seen: set[str] = set()
        for seg in self.segments:
            if seg.segment_id in seen:
                raise ValueError(f"segment_id {seg.segment_id!r} appears twice in one payload")
            seen.add(seg.segment_id)
        return self
