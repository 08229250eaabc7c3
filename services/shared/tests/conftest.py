from __future__ import annotations

from datetime import UTC, datetime

import pytest

from her_os_shared.transcript import Segment, TranscriptPayload


def make_payload(
    session_id: str = "s1", n: int = 1, text: str = "hello", prefix: str = "seg"
) -> TranscriptPayload:
    return TranscriptPayload(
        session_id=session_id,
        device_id="dev1",
        session_started_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        segments=[
            Segment(
                segment_id=f"{prefix}{i}",
                speaker="SPEAKER_00",
                text=text,
                start=float(i),
                end=float(i) + 0.5,
                language="en",
                stt_engine="faster-whisper",
            )
            for i in range(n)
        ],
    )


@pytest.fixture
def payload_factory():
    return make_payload
