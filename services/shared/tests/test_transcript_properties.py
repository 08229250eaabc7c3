"""Property tests: payloads round-trip through the writer and reader, hostile text included."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from her_os_shared.jsonl import JsonlReader, append_records, stream_path
from her_os_shared.transcript import MAX_TEXT_CHARS, Emotion, Segment, TranscriptPayload

ids = st.from_regex(r"\A[A-Za-z0-9_-]{1,128}\Z")
# Every code point, surrogates included: hostile text for the contract and the writer.
any_char = st.characters(codec=None, exclude_categories=())
hostile_text = st.text(any_char, max_size=300) | st.sampled_from(
    ["line\nbreak", "nul\x00byte", "\r\n\u2028\u2029", "\ud800", "a\udfffb", '"}\n{"x":1}', ""]
)
times = st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False)


@st.composite
def segments(draw):
    start = draw(times)
    return Segment(
        segment_id=draw(ids),
        speaker=draw(st.text(min_size=1, max_size=20)),
        text=draw(st.text(max_size=200)),
        start=start,
        end=start + draw(times),
        language=draw(st.none() | st.sampled_from(["en", "hi", "en-US", "pt-BR"])),
        stt_engine=draw(st.sampled_from(["faster-whisper", "whisperx", "client"])),
        emotion=draw(
            st.none()
            | st.builds(
                Emotion,
                label=st.sampled_from(["neutral", "happy", "sad", "angry"]),
                score=st.floats(0, 1),
                engine=st.none() | st.just("heuristic"),
            )
        ),
        pinned=draw(st.booleans()),
    )


@st.composite
def payloads(draw):
    segs = draw(st.lists(segments(), max_size=5, unique_by=lambda s: s.segment_id))
    return TranscriptPayload(
        session_id=draw(ids),
        device_id=draw(ids),
        session_started_at=datetime(2020, 1, 1, tzinfo=UTC)
        + timedelta(seconds=draw(st.integers(0, 10**9))),
        is_sweep=draw(st.booleans()),
        segments=segs,
    )


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(payloads(), min_size=1, max_size=4))
def test_payloads_round_trip_exactly(batch, tmp_path_factory) -> None:
    directory = tmp_path_factory.mktemp("rt")
    append_records(directory, "roundtrip", batch)
    reader = JsonlReader(stream_path(directory, "roundtrip"), TranscriptPayload)
    assert [r.value for r in reader] == batch
    assert reader.skipped == []


@settings(max_examples=200, deadline=None)
@given(text=hostile_text, speaker=hostile_text)
@example(text="", speaker="0" * 129)  # found by CI: too short and too long at once
def test_hostile_text_round_trips_or_is_refused_with_the_field_named(
    text, speaker, tmp_path_factory
) -> None:
    try:
        seg = Segment(segment_id="x", speaker=speaker, text=text, start=0, end=1, stt_engine="t")
    except ValidationError as exc:
        fields = {err["loc"][0] for err in exc.errors()}
        assert fields <= {"text", "speaker"}
        for err in exc.errors():
            # a speaker name longer than the schema's 128 characters is refused as too long
            too_long = err["loc"][0] == "speaker" and len(speaker) > 128
            assert (
                "surrogate" in err["msg"]
                or err["type"] == "string_too_short"
                or (too_long and err["type"] == "string_too_long")
            )
        return
    payload = TranscriptPayload(
        session_id="s", device_id="d", session_started_at=datetime.now(UTC), segments=[seg]
    )
    directory = tmp_path_factory.mktemp("hostile")
    append_records(directory, "s", [payload])
    raw = stream_path(directory, "s").read_bytes()
    assert raw.count(b"\n") == 1  # newlines inside text never split the line
    assert [r.value for r in JsonlReader(stream_path(directory, "s"), TranscriptPayload)] == [
        payload
    ]


def test_huge_text_up_to_the_limit_round_trips_and_beyond_is_refused(tmp_path: Path) -> None:
    big = "é\n\x00" * (MAX_TEXT_CHARS // 3)
    seg = Segment(segment_id="x", speaker="a", text=big, start=0, end=1, stt_engine="t")
    payload = TranscriptPayload(
        session_id="s", device_id="d", session_started_at=datetime.now(UTC), segments=[seg]
    )
    append_records(tmp_path, "s", [payload])
    assert [r.value for r in JsonlReader(stream_path(tmp_path, "s"), TranscriptPayload)] == [
        payload
    ]
    with pytest.raises(ValidationError, match="text"):
        Segment(
            segment_id="x",
            speaker="a",
            text="a" * (MAX_TEXT_CHARS + 1),
            start=0,
            end=1,
            stt_engine="t",
        )
