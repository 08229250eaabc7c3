from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from speech_synth import VOICE_A, have_espeak, silence, speak, to_wav_bytes

from audio_pipeline.audio import AudioClip, decode_audio
from audio_pipeline.backends import BackendUnavailableError
from audio_pipeline.config import Settings
from audio_pipeline.stt import (
    SpeechToText,
    SttSegment,
    create_stt,
    normalize_regions,
    whisperx_backend,
)
from audio_pipeline.stt.faster_whisper_backend import FasterWhisperStt
from audio_pipeline.vad.silero import SileroVad

pytestmark = pytest.mark.skipif(not have_espeak(), reason="espeak-ng is not installed")

SENTENCE = "Priya is moving to Koramangala next month and we ordered coffee"


def words_of(segments: list[SttSegment]) -> str:
    text = " ".join(s.text for s in segments).lower()
    return " ".join(re.sub(r"[^\w\s]", " ", text).split())


@pytest.fixture(scope="module")
def stt(tmp_path_factory: pytest.TempPathFactory) -> FasterWhisperStt:
    # The real bundled model, assembled into a throwaway models dir, loaded once.
    settings = Settings(
        allow_insecure_no_token=True,
        models_dir=tmp_path_factory.mktemp("models"),
        stt_backend="faster-whisper",
        stt_language="en",
        stt_threads=2,
    )
    backend = create_stt(settings)
    assert isinstance(backend, FasterWhisperStt)
    backend.load()
    return backend


LEAD_S = 0.7


@pytest.fixture(scope="module")
def spoken() -> tuple[AudioClip, tuple[float, float]]:
    """The sentence between 0.7 s silences, and where in the clip it is audible."""
    speech, rate = speak(SENTENCE, VOICE_A)
    samples = np.concatenate([silence(LEAD_S, rate), speech, silence(LEAD_S, rate)])
    loud = np.flatnonzero(np.abs(speech) > 0.01)  # espeak pads its own silence too
    voiced = (LEAD_S + loud[0] / rate, LEAD_S + loud[-1] / rate)
    # Through the real upload path: 22.05 kHz PCM16 WAV → 16 kHz float clip.
    return decode_audio(to_wav_bytes(samples, rate), max_seconds=60), voiced


@pytest.fixture(scope="module")
def clip(spoken) -> AudioClip:
    return spoken[0]


def assert_heard_the_sentence(
    segments: list[SttSegment], clip: AudioClip, voiced: tuple[float, float]
) -> None:
    heard = words_of(segments)
    for phrase in ("priya", "moving", "next month", "ordered", "coffee"):
        assert phrase in heard, f"{phrase!r} not in {heard!r}"
    assert all(s.language == "en" for s in segments)
    words = [w for s in segments for w in s.words]
    assert len(words) >= 9
    for w in words:
        assert 0.0 <= w.start <= w.end <= clip.duration_s
        assert 0.0 <= w.probability <= 1.0 and w.text == w.text.strip()
    starts = [w.start for w in words]
    assert starts == sorted(starts)
    # Whisper's word timings are good to a few hundred milliseconds.
    assert words[0].start == pytest.approx(voiced[0], abs=0.5)
    assert words[-1].end == pytest.approx(voiced[1], abs=0.5)


def test_the_bundled_model_transcribes_real_speech_with_word_timings(stt, spoken) -> None:
    clip, voiced = spoken
    t0 = time.perf_counter()
    segments = stt.transcribe(clip)
    rtf = (time.perf_counter() - t0) / clip.duration_s
    assert_heard_the_sentence(segments, clip, voiced)
    assert rtf < 2.0  # generous: about 0.3-0.5 on two CPU cores


def test_transcribing_only_vad_regions(stt, spoken) -> None:
    clip, voiced = spoken
    regions = SileroVad().regions(clip)
    assert len(regions) == 1
    segments = stt.transcribe(clip, regions)
    assert_heard_the_sentence(segments, clip, voiced)
    start, end = regions[0]
    assert all(start - 0.05 <= w.start and w.end <= end + 0.05 for s in segments for w in s.words)


def test_no_regions_means_no_speech(stt, clip) -> None:
    assert stt.transcribe(clip, []) == []
    assert stt.transcribe(clip, [(-5.0, -1.0), (3.0, 3.0), (999.0, 1000.0)]) == []


def test_silence_gives_no_segments(stt) -> None:
    assert stt.transcribe(AudioClip(np.zeros(16_000 * 2, dtype=np.float32))) == []


def test_concurrent_transcriptions_are_safe(stt) -> None:
    speech, rate = speak("Good morning everyone", VOICE_A)
    short = decode_audio(to_wav_bytes(speech, rate), max_seconds=60)
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda _: words_of(stt.transcribe(short)), range(2)))
    assert len(set(results)) == 1 and "morning" in results[0]


def test_regions_are_clamped_sorted_and_merged() -> None:
    assert normalize_regions([(2.0, 3.0), (-1.0, 0.5), (0.4, 1.0), (9.0, 12.0), (5, 5)], 10) == [
        (0.0, 1.0),
        (2.0, 3.0),
        (9.0, 10.0),
    ]


def test_the_default_backend_is_the_embedded_one(tmp_path: Path) -> None:
    backend = create_stt(Settings(allow_insecure_no_token=True, models_dir=tmp_path))
    assert isinstance(backend, SpeechToText) and backend.name == "faster-whisper"
    assert list(tmp_path.iterdir()) == []  # nothing loaded or assembled until asked


def test_whisperx_without_the_package_is_a_clear_error(tmp_path: Path, monkeypatch) -> None:
    # Simulate its absence so the test means the same on a machine that has it.
    monkeypatch.setattr(whisperx_backend, "module_available", lambda name: False)
    settings = Settings(
        allow_insecure_no_token=True,
        models_dir=tmp_path,
        stt_backend="whisperx",
        stt_device="cuda",
        stt_compute_type="float16",
    )
    backend = create_stt(settings)  # creating it is fine: nothing is imported yet
    assert isinstance(backend, SpeechToText) and backend.name == "whisperx"
    with pytest.raises(BackendUnavailableError) as info:
        backend.load()
    message = str(info.value)
    assert "AUDIO_PIPELINE_STT_BACKEND=whisperx needs the whisperx package" in message
    assert "AUDIO_PIPELINE_STT_BACKEND=faster-whisper" in message
    with pytest.raises(BackendUnavailableError):
        backend.transcribe(AudioClip(np.zeros(16_000, dtype=np.float32)))


def test_speech_regions_are_merged_into_whisper_windows() -> None:
    from audio_pipeline.stt.faster_whisper_backend import window_spans

    regions = [(0.5, 2.0), (3.0, 5.0), (20.0, 29.0), (31.0, 33.0), (70.0, 110.0), (111.0, 112.0)]
    assert window_spans(regions) == [(0.5, 29.0), (31.0, 33.0), (70.0, 110.0), (111.0, 112.0)]
    assert window_spans([]) == []


def test_a_repetitive_segment_is_a_loop_and_windows_are_decoded_once(tmp_path: Path) -> None:
    """Whisper's temperature fallback is off by default (one decode per window); a segment
    whose text compresses like a repetition loop is what gets dropped instead."""
    from types import SimpleNamespace

    from audio_pipeline.stt.faster_whisper_backend import LOOP_COMPRESSION_RATIO, _looping

    assert _looping(SimpleNamespace(compression_ratio=LOOP_COMPRESSION_RATIO + 0.1))
    assert not _looping(SimpleNamespace(compression_ratio=1.6))
    assert not _looping(SimpleNamespace())  # a backend without the figure keeps everything

    class RecordingModelDouble:
        """Test double for faster-whisper's model: records the options, returns a loop and
        a normal segment."""

        def __init__(self) -> None:
            self.options: dict = {}

        def transcribe(self, samples, **options):  # type: ignore[no-untyped-def]
            self.options = options
            word = SimpleNamespace(word=" yes", start=0.1, end=0.3, probability=0.9)
            loop = SimpleNamespace(
                text=" yes yes yes yes yes yes yes yes yes yes yes yes",
                start=0.0,
                end=1.0,
                words=[word],
                compression_ratio=4.2,
            )
            fine = SimpleNamespace(text=" the train leaves at nine", start=1.0, end=2.0,
                                   words=[SimpleNamespace(word=" the", start=1.0, end=1.2,
                                                          probability=0.9)],
                                   compression_ratio=1.1)  # fmt: skip
            return iter([loop, fine]), SimpleNamespace(language="en")

    for fallback, temperature in ((False, 0.0), (True, None)):
        backend = FasterWhisperStt(models_dir=tmp_path, temperature_fallback=fallback)
        double = RecordingModelDouble()
        backend._model = double  # type: ignore[assignment]
        segments = backend.transcribe(AudioClip(np.zeros(32000, dtype=np.float32)), [(0.0, 2.0)])
        assert [s.text for s in segments] == ["the train leaves at nine"]
        assert double.options.get("temperature") == temperature
    assert (
        create_stt(
            Settings(allow_insecure_no_token=True, models_dir=tmp_path)
        )._temperature_fallback
        is False
    )  # type: ignore[attr-defined]
