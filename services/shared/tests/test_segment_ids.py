"""Segment ids: the design's own ids (`seg-001-0.00-4.52`, with dots) are valid; path ids
(session, device, stream) still refuse dots; a segment id stays inert as a path part."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import TypeAdapter, ValidationError

from her_os_shared.ids import InvalidIdError, SegmentId, validate_id
from her_os_shared.jsonl import JsonlReader, append_records
from her_os_shared.transcript import TranscriptPayload

# The design's JSONL payload (her-os-architecture.md, Layer 1), as it writes it.
DESIGN_LINE = {
    "session_id": "c9cf6c7f-7d00-4421-b774-1c33a5e7cc5b",
    "device_id": "flutter-omi",
    "session_started_at": 1709542800.0,
    "is_sweep": False,
    "segments": [
        {
            "segment_id": "seg-001-0.00-4.52",
            "speaker": "rajesh",
            "text": "I was thinking about that coffee shop on 5th street",
            "start": 0.0,
            "end": 4.52,
            "language": "en",
            "stt_engine": "whisper",
            "emotion": {"label": "excited", "score": 0.82},
        }
    ],
}

segment_id = TypeAdapter(SegmentId)


def test_the_designs_jsonl_line_is_read_not_skipped(tmp_path: Path) -> None:
    path = tmp_path / f"{DESIGN_LINE['session_id']}.jsonl"
    path.write_text(json.dumps(DESIGN_LINE) + "\n")
    reader = JsonlReader(path, TranscriptPayload)
    records = list(reader)
    assert reader.skipped == [] and len(records) == 1
    payload = records[0].value
    assert payload.segments[0].segment_id == "seg-001-0.00-4.52"
    # The design's epoch float is read as that instant, in UTC.
    assert payload.session_started_at == datetime.fromtimestamp(1709542800.0, UTC)


def test_a_dotted_segment_id_round_trips_through_the_writer(tmp_path: Path) -> None:
    payload = TranscriptPayload.model_validate(DESIGN_LINE)
    append_records(tmp_path, payload.session_id, [payload])
    (back,) = [r.value for r in JsonlReader(tmp_path / f"{payload.session_id}.jsonl",
                                            TranscriptPayload)]  # fmt: skip
    assert back == payload
    # What the project writes: ISO 8601 with the offset (read back as the same instant).
    line = json.loads((tmp_path / f"{payload.session_id}.jsonl").read_text())
    assert line["session_started_at"] == "2024-03-04T09:00:00Z"


@pytest.mark.parametrize(
    "good", ["seg-001-0.00-4.52", "c0000-001", "s01k000-002", "w-abc_1", "a", "a.b.c", "x" * 128]
)
def test_valid_segment_ids(good: str) -> None:
    assert segment_id.validate_python(good) == good


@pytest.mark.parametrize(
    "bad",
    [
        "",
        ".",
        "..",
        ".hidden",
        "a..b",
        "../etc",
        "a/b",
        "a\\b",
        "a b",
        "a\n",
        "a\x00",
        "ä",
        "x" * 129,
    ],
)
def test_segment_ids_that_could_act_as_a_path_are_refused(bad: str) -> None:
    with pytest.raises(ValidationError, match="not starting with a dot"):
        segment_id.validate_python(bad)
    body = json.loads(json.dumps(DESIGN_LINE))
    body["segments"][0]["segment_id"] = bad
    with pytest.raises(ValidationError, match=r"segments\.0\.segment_id"):
        TranscriptPayload.model_validate(body)


@pytest.mark.parametrize("field", ["session_id", "device_id"])
def test_path_ids_still_refuse_dots(field: str) -> None:
    body = DESIGN_LINE | {field: "a.b"}
    with pytest.raises(ValidationError, match=field):
        TranscriptPayload.model_validate(body)
    with pytest.raises(InvalidIdError):
        validate_id("seg-001-0.00-4.52", field)
