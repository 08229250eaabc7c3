"""The fast path end to end on real models and real (synthesised) speech."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import soxr
from speech_synth import VOICE_A, VOICE_B, conversation, have_espeak

from audio_pipeline.audio import SAMPLE_RATE, AudioClip
from audio_pipeline.config import Settings
from audio_pipeline.pipeline import Models, transcribe_clip
from audio_pipeline.speakers.enrollment import EnrollmentBank, SessionSpeakers
from her_os_shared.transcript import TranscriptPayload

pytestmark = pytest.mark.skipif(not have_espeak(), reason="espeak-ng is not installed")


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Models:
    root = tmp_path_factory.mktemp("models")
    m = Models.from_settings(Settings(allow_insecure_no_token=True, models_dir=root))
    m.load()
    return m


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


def test_two_voices_become_two_named_speakers_with_words_and_emotions(
    models: Models, tmp_path: Path
) -> None:
    samples, rate, _ = conversation(
        [
            (VOICE_A, "I booked the dentist appointment for Thursday morning."),
            (VOICE_B, "Great, then I will pick up the children after school."),
            (VOICE_A, "Thank you, that helps me a lot this week."),
        ]
    )
    clip = AudioClip(soxr.resample(samples, rate, SAMPLE_RATE).astype(np.float32))
    bank = EnrollmentBank(tmp_path / "enrollment")
    result = transcribe_clip(
        models, clip, speakers=SessionSpeakers(bank), offset_s=30.0, id_prefix="c1"
    )
    said = set().union(*(words(s.text) for s in result.segments))
    assert {"dentist", "thursday", "children", "school"} <= said
    assert len(result.segments) == 3  # one per turn: the pauses between turns split them
    assert len({s.speaker for s in result.segments}) == 2
    assert {s.speaker for s in result.segments} <= {"unknown_1", "unknown_2"}
    # The first and third turns are the same voice: same speaker label.
    first = next(s for s in result.segments if "dentist" in words(s.text))
    last = next(s for s in result.segments if "week" in words(s.text))
    middle = next(s for s in result.segments if "children" in words(s.text))
    assert first.speaker == last.speaker != middle.speaker
    # Times are on the session's clock, inside this clip.
    assert all(30.0 <= s.start <= s.end <= 30.0 + clip.duration_s + 0.01 for s in result.segments)
    assert all(s.emotion is not None and s.emotion.engine == "heuristic" for s in result.segments)
    # The segments make a valid transcript payload.
    TranscriptPayload.model_validate(
        {"session_id": "s1", "device_id": "d1", "session_started_at": "2026-05-08T13:56:00Z",
         "segments": [s.model_dump() for s in result.segments]}
    )  # fmt: skip


def test_silence_gives_no_segments(models: Models, tmp_path: Path) -> None:
    clip = AudioClip(np.zeros(SAMPLE_RATE * 3, dtype=np.float32))
    bank = EnrollmentBank(tmp_path / "enrollment")
    result = transcribe_clip(models, clip, speakers=SessionSpeakers(bank))
    assert result.segments == [] and result.regions == []
