"""The fast path end to end on real models and real (synthesised) speech."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import soxr
from speech_synth import (
    DIALOGUE,
    MEETING,
    VOICE_A,
    VOICE_B,
    VOICE_C,
    VOICE_D,
    conversation,
    have_espeak,
    meeting,
    talk,
)

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


def test_overlapped_speech_keeps_its_main_speaker_and_records_the_other(
    models: Models, tmp_path: Path
) -> None:
    """Two voices at once: each segment keeps one speaker, and the segment that was talked
    over records who else talked and when (session time); the JSON line carries it."""
    assert models.speech_from_diarizer  # the default: speech and turns from one pass
    a = (VOICE_A, f"{DIALOGUE[0][1]} {DIALOGUE[2][1]}")
    b = (VOICE_B, f"{DIALOGUE[1][1]} {DIALOGUE[3][1]}")
    samples, ref = talk([a, b], -1.5)  # B starts 1.5 s before A has finished
    clip = AudioClip(samples)
    bank = EnrollmentBank(tmp_path / "enrollment")
    result = transcribe_clip(models, clip, speakers=SessionSpeakers(bank), offset_s=10.0)
    assert len({s.speaker for s in result.segments}) == 2
    over = [(s, o) for s in result.segments for o in s.overlap]
    assert over, [(s.speaker, s.start, s.end) for s in result.segments]
    for seg, o in over:
        assert o.speaker != seg.speaker
        assert o.speaker in {s.speaker for s in result.segments}
        assert seg.start - 0.001 <= o.start < o.end <= seg.end + 0.001
    # The overlap lies where the two lines do overlap (1.5 s before A's end; 0.5 s slack).
    a_end, b_start = ref[0][2] + 10.0, ref[1][1] + 10.0
    assert any(o.end > b_start - 0.5 and o.start < a_end + 0.5 for _, o in over), over
    line = json.loads(over[0][0].model_dump_json())
    assert line["overlap"][0]["speaker"] == over[0][1].speaker
    alone = [s for s in result.segments if not s.overlap]
    assert all("overlap" not in json.loads(s.model_dump_json()) for s in alone)
    # The diarizer's turns overlap there too, and come back for callers that need them.
    assert any(x.speaker != y.speaker and x.start < y.end and y.start < x.end
               for x in result.turns for y in result.turns)  # fmt: skip


def test_a_meeting_of_four_voices_becomes_four_speakers_line_by_line(
    models: Models, tmp_path: Path
) -> None:
    voices = [VOICE_A, VOICE_B, VOICE_C, VOICE_D]
    samples, ref = talk(meeting(voices), 0.4)
    clip = AudioClip(samples)
    result = transcribe_clip(models, clip, speakers=SessionSpeakers(EnrollmentBank(tmp_path)))
    assert {s.speaker for s in result.segments} == {f"unknown_{k}" for k in range(1, 5)}
    # Each line's words are in segments of one speaker, the same for every line of a voice
    # and another for each voice (a line whose words the recogniser lost is not checked).
    said: dict[str, set[str]] = {}
    for (voice, a, b), line in zip(ref, MEETING, strict=True):
        inside = [s for s in result.segments if s.start < b and s.end > a]
        heard = {s.speaker for s in inside if words(s.text) & words(line)}
        assert len(heard) <= 1, (line, inside)
        said.setdefault(voice, set()).update(heard)
    assert all(len(v) == 1 for v in said.values()), said
    assert len(set().union(*said.values())) == 4, said


def test_other_vad_and_diarizer_choices_build_and_share_models(tmp_path: Path) -> None:
    base = {"allow_insecure_no_token": True, "models_dir": tmp_path}
    m = Models.from_settings(Settings(**base))
    assert (m.vad.name, m.diarizer.name, m.speech_from_diarizer) == (
        "segmentation", "segmented", True
    )  # fmt: skip
    assert m.vad.segmentation is m.diarizer.segmentation  # type: ignore[attr-defined]
    m = Models.from_settings(Settings(**base, vad_backend="silero"))
    assert (m.vad.name, m.diarizer.name, m.speech_from_diarizer) == ("silero", "segmented", False)
    m = Models.from_settings(Settings(**base, diarization_backend="embedded"))
    assert (m.vad.name, m.diarizer.name, m.speech_from_diarizer) == (
        "segmentation", "embedded", False
    )  # fmt: skip


def test_silence_gives_no_segments(models: Models, tmp_path: Path) -> None:
    clip = AudioClip(np.zeros(SAMPLE_RATE * 3, dtype=np.float32))
    bank = EnrollmentBank(tmp_path / "enrollment")
    result = transcribe_clip(models, clip, speakers=SessionSpeakers(bank))
    assert result.segments == [] and result.regions == []
