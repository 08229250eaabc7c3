"""The overlap-aware diarizer (speakers/segmented.py) on speech the tests make themselves
(espeak-ng voices): who talks when from pyannote's segmentation model, who is who from CAM++
windows, two turns at once where two voices overlap; silence, short and empty clips."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from types import SimpleNamespace

import numpy as np
import pytest
import soxr
from speech_synth import (
    DIALOGUE,
    VOICE_A,
    VOICE_B,
    VOICE_C,
    VOICE_D,
    have_espeak,
    meeting,
    speak,
    speech16k,
    talk,
    to_wav_bytes,
)

from audio_pipeline.audio import AudioClip
from audio_pipeline.config import Settings
from audio_pipeline.speakers import (
    Diarizer,
    Turn,
    create_diarizer,
    create_embedder,
)
from audio_pipeline.speakers.pyannote_backend import turns_from_output
from audio_pipeline.speakers.segmentation import CHUNK_SAMPLES, SAMPLE_RATE
from audio_pipeline.speakers.segmented import SegmentedDiarizer, chunk_starts, spans
from audio_pipeline.vad import SPEECH_PAD_S, pad_regions
from audio_pipeline.vad.segmentation import SegmentationVad

pytestmark = pytest.mark.skipif(not have_espeak(), reason="espeak-ng is not installed")

LINES = DIALOGUE


@pytest.fixture(scope="module")
def diarizer() -> SegmentedDiarizer:
    settings = Settings(allow_insecure_no_token=True, diarization_backend="segmented")
    d = create_diarizer(settings, embedder=create_embedder(settings))
    assert isinstance(d, SegmentedDiarizer) and isinstance(d, Diarizer)
    d.load()
    return d


def _talk(
    parts: list[tuple[str, str]], gap_s: float
) -> tuple[AudioClip, list[tuple[str, float, float]]]:
    samples, ref = talk(parts, gap_s)
    return AudioClip(samples), ref


def _time(turns: list[Turn], voice_of: dict[str, str], voice: str, a: float, b: float) -> float:
    return sum(
        max(0.0, min(b, t.end) - max(a, t.start)) for t in turns if voice_of.get(t.speaker) == voice
    )


def _voices(turns: list[Turn], ref: list[tuple[str, float, float]]) -> dict[str, str]:
    """Each speaker → the reference voice it overlaps most."""
    out = {}
    for s in {t.speaker for t in turns}:
        mine = [t for t in turns if t.speaker == s]
        out[s] = max(
            {v for v, _, _ in ref},
            key=lambda v: sum(_time(mine, {s: v}, v, a, b) for w, a, b in ref if w == v),
        )
    return out


def test_a_dialogue_is_two_speakers_in_the_right_places(diarizer: SegmentedDiarizer) -> None:
    clip, ref = _talk(LINES, 0.6)
    result = diarizer.run(clip)
    turns = result.turns
    assert {t.speaker for t in turns} == {"SPEAKER_00", "SPEAKER_01"}
    assert turns == sorted(turns, key=lambda t: (t.start, t.end))
    voice_of = _voices(turns, ref)
    assert set(voice_of.values()) == {VOICE_A, VOICE_B}
    speech = sum(b - a for _, a, b in ref)
    right = sum(_time(turns, voice_of, v, a, b) for v, a, b in ref)
    assert right / speech >= 0.8, (right / speech, turns)
    said = sum(t.end - t.start for t in turns)
    assert right / said >= 0.85, (right / said, turns)
    # A, B, A, B in that order, and both voices have an embedding for identity.
    firsts = [voice_of[k] for k, _ in itertools.groupby(t.speaker for t in turns)]
    assert [k for k, _ in itertools.groupby(firsts)] == [VOICE_A, VOICE_B, VOICE_A, VOICE_B]
    assert set(result.embeddings) == {"SPEAKER_00", "SPEAKER_01"}
    assert all(abs(np.linalg.norm(e) - 1) < 1e-3 for e in result.embeddings.values())


def test_overlapped_speech_gets_two_turns_at_once(diarizer: SegmentedDiarizer) -> None:
    # Each voice talks long enough alone to be clustered (three windows or more); B starts
    # 1.5 s before A has finished.
    a = (VOICE_A, f"{LINES[0][1]} {LINES[2][1]}")
    b = (VOICE_B, f"{LINES[1][1]} {LINES[3][1]}")
    clip, _ = _talk([a, b], -1.5)
    result = diarizer.run(clip)
    overlapped = sum(b - a for a, b in result.overlap)
    assert overlapped > 0.3, result.overlap
    both = [
        (a, b)
        for x, y in itertools.combinations(result.turns, 2)
        if x.speaker != y.speaker
        for a, b in [(max(x.start, y.start), min(x.end, y.end))]
        if b > a
    ]
    assert sum(b - a for a, b in both) > 0.3, result.turns
    # The main speaker alone: never two at once, each inside one of that speaker's turns,
    # and together covering all the speech.
    for x, y in itertools.pairwise(result.exclusive):
        assert x.end <= y.start, result.exclusive
    for x in result.exclusive:
        assert any(t.speaker == x.speaker and t.start <= x.start and x.end <= t.end
                   for t in result.turns), x  # fmt: skip
    covered = sum(t.end - t.start for t in result.exclusive)
    assert covered == pytest.approx(sum(b - a for a, b in result.speech), abs=0.05)
    # As the pipeline sees it: the same speech, turns and overlap from one pass.
    found = diarizer.diarize_speech(clip)
    assert (found.turns, found.speech, found.overlap) == (
        result.turns, result.speech, result.overlap
    )  # fmt: skip
    assert found.timings_s.keys() == {"segmentation", "clustering"}


@pytest.mark.parametrize(
    "voices", [[VOICE_A, VOICE_B, VOICE_C], [VOICE_A, VOICE_B, VOICE_C, VOICE_D]],
    ids=["three", "four"],
)  # fmt: skip
def test_three_or_four_voices_are_each_a_speaker_of_their_own(
    diarizer: SegmentedDiarizer, voices: list[str]
) -> None:
    clip, ref = _talk(meeting(voices), 0.4)
    turns = diarizer.run(clip).turns
    assert len({t.speaker for t in turns}) == len(voices), turns
    voice_of = _voices(turns, ref)
    assert sorted(voice_of.values()) == sorted(voices)  # one speaker per voice
    speech = sum(b - a for _, a, b in ref)
    right = sum(_time(turns, voice_of, v, a, b) for v, a, b in ref)
    assert right / speech >= 0.75, (right / speech, turns)


def _main_speaker(turns: list[Turn], a: float, b: float) -> str:
    return max({t.speaker for t in turns}, key=lambda s: _time(turns, {s: s}, s, a, b))


def test_a_voice_heard_only_briefly_is_not_folded_into_another(
    diarizer: SegmentedDiarizer,
) -> None:
    """C says two words between A's and B's longer lines: too little for a cluster of its
    own, so the clustering would fold it into the nearest voice; the segmentation model
    hears a different local speaker there and keeps it apart."""
    lines = meeting([VOICE_A, VOICE_B])[:4]
    clip, ref = _talk([*lines[:2], (VOICE_C, "Sounds fine."), *lines[2:]], 0.4)
    turns = diarizer.run(clip).turns
    assert ref[2][2] - ref[2][1] < 1.5  # shorter than one embedding window
    heard = [_main_speaker(turns, a, b) for _, a, b in ref]
    assert heard[0] == heard[3] != heard[1] == heard[4], (heard, turns)
    assert heard[2] not in (heard[0], heard[1]), (heard, turns)


def test_three_voices_in_ten_seconds(diarizer: SegmentedDiarizer) -> None:
    parts = [(VOICE_A, "Shall we go?"), (VOICE_B, "Not yet, wait."),
             (VOICE_C, "I am ready now."), (VOICE_A, "Good, let us leave.")]  # fmt: skip
    clip, ref = _talk(parts, 0.3)
    assert clip.duration_s < 10.0
    turns = diarizer.run(clip).turns
    heard = [_main_speaker(turns, a, b) for _, a, b in ref]
    assert len(set(heard[:3])) == 3 and heard[3] == heard[0], (heard, turns)


class _AnnotationDouble:
    """Test double of a pyannote.core Annotation: the one method the backend reads."""

    def __init__(self, tracks: list[tuple[float, float, str]]) -> None:
        self.tracks = tracks

    def itertracks(self, yield_label: bool = False) -> Iterator[tuple[SimpleNamespace, int, str]]:
        assert yield_label
        for k, (a, b, label) in enumerate(self.tracks):
            yield SimpleNamespace(start=a, end=b), k, label


def test_the_production_pyannote_backend_gives_turns_in_the_same_form(
    diarizer: SegmentedDiarizer,
) -> None:
    """Item 5: pyannote.audio's result (3.x: an annotation; 4.x: a DiarizeOutput) comes out
    as the segmented diarizer's does: sorted turns, SPEAKER_nn by first appearance, two
    overlapping turns where two talk; so the pipeline's overlap and main-speaker views match."""
    a = (VOICE_A, f"{LINES[0][1]} {LINES[2][1]}")
    b = (VOICE_B, f"{LINES[1][1]} {LINES[3][1]}")
    clip, _ = _talk([a, b], -1.5)
    found = diarizer.run(clip)
    # pyannote's labels are not in order of appearance, and its tracks not in time order.
    rename = {"SPEAKER_00": "SPEAKER_01", "SPEAKER_01": "SPEAKER_00"}
    tracks = [(t.start, t.end, rename.get(t.speaker, t.speaker)) for t in found.turns][::-1]
    speech = [(0.0, clip.duration_s)]
    v3 = turns_from_output(_AnnotationDouble(tracks), clip.duration_s, speech)
    v4 = turns_from_output(
        SimpleNamespace(
            speaker_diarization=_AnnotationDouble(tracks),
            exclusive_speaker_diarization=_AnnotationDouble([]),
        ),
        clip.duration_s,
        speech,
    )
    assert v3 == v4 == found.turns
    assert any(x.speaker != y.speaker and x.start < y.end and y.start < x.end
               for x, y in itertools.combinations(v3, 2))  # fmt: skip
    # Turns outside the speech regions are dropped; ends are clipped to the clip.
    late = [(0.5, 1.0, "SPEAKER_07"), (clip.duration_s - 0.2, clip.duration_s + 5, "SPEAKER_03")]
    got = turns_from_output(_AnnotationDouble(late), clip.duration_s, [(clip.duration_s - 1, 99)])
    assert got == [Turn(round(clip.duration_s - 0.2, 3), round(clip.duration_s, 3), "SPEAKER_00")]


def test_the_segmentation_vad_finds_the_speech_the_diarizer_finds(
    diarizer: SegmentedDiarizer,
) -> None:
    clip, ref = _talk([(VOICE_A, LINES[0][1]), (VOICE_B, LINES[1][1])], 1.0)
    vad = SegmentationVad(diarizer.segmentation)
    regions = vad.regions(clip)
    speech = diarizer.run(clip).speech
    assert regions == pad_regions(speech, clip.duration_s)  # padded as Silero pads
    for a, b in speech:  # each stretch of speech lies inside a region, padded on both sides
        assert any(
            x <= max(0.0, a - SPEECH_PAD_S) + 1e-9
            and min(clip.duration_s, b + SPEECH_PAD_S) <= y + 1e-9
            for x, y in regions
        ), (speech, regions)
    for _, a, b in ref:  # each line's voiced part is mostly inside the speech found
        inside = sum(max(0.0, min(b, y) - max(a, x)) for x, y in regions)
        assert inside > 0.8 * (b - a), (regions, ref)
    assert vad.regions(AudioClip(np.zeros(3 * SAMPLE_RATE, dtype=np.float32))) == []


def test_silence_short_and_empty_clips(diarizer: SegmentedDiarizer) -> None:
    assert diarizer.diarize(AudioClip(np.zeros(4 * SAMPLE_RATE, dtype=np.float32)), []) == []
    assert diarizer.diarize(AudioClip(np.zeros(0, dtype=np.float32)), []) == []
    one = speech16k("Yes, absolutely.", VOICE_A)  # far shorter than a 10 s chunk
    turns = diarizer.diarize(AudioClip(np.concatenate([one, np.zeros(8000, np.float32)])), [])
    assert {t.speaker for t in turns} == {"SPEAKER_00"}
    with pytest.raises(ValueError, match="16000 Hz"):
        diarizer.run(AudioClip(np.zeros(8000, dtype=np.float32), sample_rate=8000))


def test_chunks_slide_as_pyannotes_and_frames_become_spans() -> None:
    step = SAMPLE_RATE
    assert chunk_starts(5 * SAMPLE_RATE, step) == [0]
    assert chunk_starts(CHUNK_SAMPLES, step) == [0]
    assert chunk_starts(CHUNK_SAMPLES + 2 * step, step) == [0, step, 2 * step]
    assert chunk_starts(CHUNK_SAMPLES + 2 * step + 5, step) == [0, step, 2 * step, 3 * step]
    mask = np.array([0, 1, 1, 0, 0, 1], dtype=bool)
    (a1, b1), (a2, b2) = spans(mask, 1.0)
    assert 0 < a1 < b1 < a2 < b2 <= 1.0
    with pytest.raises(ValueError, match="step_s"):
        SegmentedDiarizer(create_embedder(Settings(allow_insecure_no_token=True)), step_s=20)


def test_hard_audio_gives_turns_or_nothing_never_an_error(diarizer: SegmentedDiarizer) -> None:
    """Music, one word, 8 kHz audio, clipping and a DC offset: a result, never a crash; the
    speech among them is still found."""
    from audio_pipeline.audio import decode_audio

    t = np.arange(6 * SAMPLE_RATE) / SAMPLE_RATE
    chords = sum(np.sin(2 * np.pi * f * t) for f in (220.0, 277.2, 329.6, 440.0))
    music = (0.15 * chords * (0.6 + 0.4 * np.sin(2 * np.pi * 0.5 * t))).astype(np.float32)
    word = speech16k("Yes.", VOICE_B)
    line = speech16k(LINES[0][1], VOICE_A)
    narrow, rate = speak(LINES[0][1], VOICE_A)
    narrow = soxr.resample(narrow, rate, 8000).astype(np.float32)
    cases = {
        "music": AudioClip(music),
        "one word": AudioClip(word),
        "8 kHz": decode_audio(to_wav_bytes(narrow, 8000), max_seconds=600),
        "clipped": AudioClip(np.clip(line * 20, -1, 1).astype(np.float32)),
        "dc offset": AudioClip((line + 0.3).astype(np.float32)),
    }
    for name, clip in cases.items():
        result = diarizer.run(clip)
        for turn in result.turns:
            assert 0 <= turn.start < turn.end <= clip.duration_s + 1e-6, (name, turn)
        if name != "music":
            assert result.turns, f"{name}: the speech was not found"


def test_overlap_the_chunks_cannot_name_goes_to_the_nearest_other_voice() -> None:
    """Frames where two people talk but no chunk names the second: the voice heard just
    before or after (not the frame's own); with only one voice in the clip, nobody."""
    # frames:   0  1  2  3  4  5  6  7
    main = np.array([0, 0, 1, 1, 1, 2, 2, -1])
    count = np.array([1, 2, 2, 2, 1, 2, 1, 0])
    second = np.array([-1, -1, -1, 0, -1, -1, -1, -1])  # frame 3 named by the chunks
    filled = SegmentedDiarizer._fill_second(main, second, count)
    # frame 1 (voice 0): voice 1 starts next frame; frame 2 (voice 1): voice 0 just before;
    # frame 3 keeps the chunks' answer; frame 5 (voice 2): voice 1 just before
    assert filled.tolist() == [-1, 1, 0, 0, -1, 1, -1, -1]
    assert second.tolist() == [-1, -1, -1, 0, -1, -1, -1, -1]  # not changed in place
    alone = SegmentedDiarizer._fill_second(np.zeros(4, dtype=np.int64), -np.ones(4, dtype=np.int64),
                                           np.array([2, 2, 1, 1]))  # fmt: skip
    assert alone.tolist() == [-1, -1, -1, -1]
