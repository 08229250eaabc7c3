from __future__ import annotations

import numpy as np
import pytest
from speech_synth import VOICE_A, VOICE_B, have_espeak, silence, speak, to_wav_bytes

from audio_pipeline import backends, bundled
from audio_pipeline.audio import SAMPLE_RATE, AudioClip, decode_audio
from audio_pipeline.backends import BackendUnavailableError
from audio_pipeline.bundled import ModelIntegrityError
from audio_pipeline.config import Settings
from audio_pipeline.vad import SPEECH_PAD_S, VoiceActivity, create_vad
from audio_pipeline.vad.segmentation import SegmentationVad
from audio_pipeline.vad.silero import SileroVad

pytestmark = pytest.mark.skipif(not have_espeak(), reason="espeak-ng is not installed")


@pytest.fixture(scope="module", params=["segmentation", "silero"])
def vad(request: pytest.FixtureRequest) -> VoiceActivity:
    """Both embedded backends: the segmentation model (the default) and Silero."""
    backend = create_vad(Settings(allow_insecure_no_token=True, vad_backend=request.param))
    kind = SegmentationVad if request.param == "segmentation" else SileroVad
    assert isinstance(backend, kind) and isinstance(backend, VoiceActivity)
    backend.load()
    return backend


def voiced_span(samples: np.ndarray, rate: int) -> tuple[float, float]:
    """Where espeak's output is actually audible (it pads its own silence)."""
    loud = np.flatnonzero(np.abs(samples) > 0.01)
    return loud[0] / rate, loud[-1] / rate


def test_speech_silence_speech_gives_two_regions_at_the_right_times(vad) -> None:
    a, rate = speak("Hello there, how are you doing today?", VOICE_A)
    b, _ = speak("The weather is lovely in Bangalore.", VOICE_B)
    lead, gap = 0.8, 1.5
    samples = np.concatenate([silence(lead, rate), a, silence(gap, rate), b, silence(0.8, rate)])
    clip = decode_audio(to_wav_bytes(samples, rate), max_seconds=60)

    a0, a1 = voiced_span(a, rate)
    b0, b1 = voiced_span(b, rate)
    b_offset = lead + len(a) / rate + gap
    expected = [(lead + a0, lead + a1), (b_offset + b0, b_offset + b1)]

    regions = vad.regions(clip)
    assert len(regions) == 2, regions
    # Each backend pads its regions (Silero 0.2 s, the segmentation VAD SPEECH_PAD_S).
    slack = 0.15 + (SPEECH_PAD_S if isinstance(vad, SegmentationVad) else 0.2)
    for (start, end), (want_start, want_end) in zip(regions, expected, strict=True):
        assert start == pytest.approx(want_start, abs=slack)
        assert end == pytest.approx(want_end, abs=slack)
    assert 0 <= regions[0][0] < regions[0][1] < regions[1][0] < regions[1][1] <= clip.duration_s


def test_pure_silence_and_faint_noise_give_no_regions(vad) -> None:
    assert vad.regions(AudioClip(np.zeros(SAMPLE_RATE * 3, dtype=np.float32))) == []
    noise = np.random.default_rng(0).normal(0, 0.002, SAMPLE_RATE * 3).astype(np.float32)
    assert vad.regions(AudioClip(noise)) == []
    assert vad.regions(AudioClip(np.zeros(0, dtype=np.float32))) == []


def test_a_corrupted_silero_model_is_refused(monkeypatch) -> None:
    wrong = bundled.BundledFile(**{**_fields(bundled.SILERO_VAD), "sha256": "0" * 64})
    monkeypatch.setattr(bundled, "SILERO_VAD", wrong)
    with pytest.raises(ModelIntegrityError, match=r"silero_vad_v6\.onnx"):
        SileroVad().load()


def _fields(spec: bundled.BundledFile) -> dict:
    return {name: getattr(spec, name) for name in spec.__slots__}


def test_pyannote_without_the_package_is_a_clear_error(monkeypatch) -> None:
    monkeypatch.setattr(backends, "module_available", lambda name: False)
    settings = Settings(allow_insecure_no_token=True, vad_backend="pyannote", pyannote_token="t")
    backend = create_vad(settings)
    assert backend.name == "pyannote"
    with pytest.raises(BackendUnavailableError) as info:
        backend.load()
    assert "AUDIO_PIPELINE_VAD_BACKEND=pyannote needs the pyannote.audio package" in str(info.value)
    assert "AUDIO_PIPELINE_VAD_BACKEND=silero" in str(info.value)


def test_pyannote_without_a_token_is_a_clear_error(monkeypatch) -> None:
    monkeypatch.setattr(backends, "module_available", lambda name: True)
    backend = create_vad(Settings(allow_insecure_no_token=True, vad_backend="pyannote"))
    with pytest.raises(BackendUnavailableError, match="AUDIO_PIPELINE_PYANNOTE_TOKEN is not set"):
        backend.load()
