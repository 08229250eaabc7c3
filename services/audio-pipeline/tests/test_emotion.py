"""Speech emotion: the embedded heuristic on real (espeak-ng) speech, the backend factory, and
the emotion2vec backend's contract without funasr."""

from __future__ import annotations

import functools
import time

import numpy as np
import pytest
from speech_synth import VOICE_A, VOICE_B, have_espeak, speak

from audio_pipeline.backends import BackendUnavailableError
from audio_pipeline.config import Settings
from audio_pipeline.emotion import (
    BACKEND_SETTING,
    LABELS,
    EmotionBackendUnavailable,
    SpeechEmotion,
    create_emotion,
    shared_label,
)
from audio_pipeline.emotion import emotion2vec as e2v
from audio_pipeline.emotion.heuristic import (
    Baseline,
    HeuristicEmotion,
    arousal_of,
    call_baseline,
    count_syllables,
    estimate_f0,
    label_of,
    measure_prosody,
)
from her_os_shared.transcript import Emotion

needs_espeak = pytest.mark.skipif(not have_espeak(), reason="espeak-ng is not installed")

POSITIVE = "I love this, what a wonderful day. Everything is great!"
NEGATIVE = "I hate this. It is terrible and everything is awful."
NEUTRAL = "The meeting is on Tuesday at the office on the second floor."


@functools.cache
def _speech(text: str, voice: str, speed: int) -> tuple[np.ndarray, int]:
    return speak(text, voice, speed=speed)


def calm(text: str, voice: str = VOICE_A) -> tuple[np.ndarray, int]:
    samples, rate = _speech(text, voice, 130)
    return samples * 0.3, rate


def excited(text: str, voice: str = VOICE_A) -> tuple[np.ndarray, int]:
    samples, rate = _speech(text, voice, 220)
    return np.clip(samples * 2.0, -1.0, 1.0), rate


@pytest.fixture(scope="module")
def heuristic() -> HeuristicEmotion:
    return HeuristicEmotion()


def _settings(**kw: object) -> Settings:
    return Settings(allow_insecure_no_token=True, **kw)


def _valid(emotion: Emotion | None) -> Emotion:
    assert emotion is not None
    # Round-trip through the shared contract: what the pipeline writes must validate.
    checked = Emotion.model_validate(emotion.model_dump())
    assert checked.engine == "heuristic"
    assert checked.label in LABELS
    assert 0.0 <= checked.score <= 1.0
    return checked


# --- pitch -----------------------------------------------------------------------------------


@pytest.mark.parametrize("rate", [16_000, 22_050, 44_100])
def test_f0_of_a_200_hz_sine_is_within_5_percent(rate: int) -> None:
    t = np.arange(rate) / rate
    f0 = estimate_f0((0.3 * np.sin(2 * np.pi * 200.0 * t)).astype(np.float32), rate)
    assert np.isfinite(f0).mean() > 0.9
    assert abs(float(np.nanmedian(f0)) - 200.0) / 200.0 < 0.05


def test_f0_follows_the_fundamental_not_a_harmonic_and_silence_is_unvoiced() -> None:
    rate = 22_050
    t = np.arange(rate) / rate
    # Harmonics 2..7 of 150 Hz without the fundamental itself: the period is still 1/150 s.
    tone = sum(np.sin(2 * np.pi * 150.0 * k * t + k) for k in range(2, 8)) * 0.05
    f0 = estimate_f0(tone.astype(np.float32), rate)
    assert abs(float(np.nanmedian(f0)) - 150.0) < 150.0 * 0.05
    assert np.isnan(estimate_f0(np.zeros(rate, np.float32), rate)).all()


@needs_espeak
def test_f0_of_speech_is_in_the_voice_range() -> None:
    samples, rate = _speech(NEUTRAL, VOICE_A, 150)
    f0 = estimate_f0(samples, rate)
    voiced = f0[np.isfinite(f0)]
    assert voiced.size > 20
    assert 70.0 < float(np.median(voiced)) < 250.0


# --- valence and arousal on real speech ------------------------------------------------------


@needs_espeak
@pytest.mark.parametrize("voice", [VOICE_A, VOICE_B])
def test_positive_and_negative_sentences_get_different_valence_driven_labels(
    heuristic: HeuristicEmotion, voice: str
) -> None:
    for prosody in (calm, excited):
        pos = _valid(heuristic.classify(*prosody(POSITIVE, voice), POSITIVE))
        neg = _valid(heuristic.classify(*prosody(NEGATIVE, voice), NEGATIVE))
        neu = _valid(heuristic.classify(*prosody(NEUTRAL, voice), NEUTRAL))
        assert pos.label == "happy"
        assert neg.label in {"angry", "sad"}
        assert neu.label == "neutral"


@needs_espeak
@pytest.mark.parametrize("voice", [VOICE_A, VOICE_B])
def test_louder_faster_speech_raises_arousal(heuristic: HeuristicEmotion, voice: str) -> None:
    for text in (POSITIVE, NEGATIVE, NEUTRAL):
        quiet = heuristic.assess(*calm(text, voice), text)
        loud = heuristic.assess(*excited(text, voice), text)
        assert quiet.arousal is not None and loud.arousal is not None
        assert loud.arousal > quiet.arousal + 0.3
        assert loud.prosody is not None and quiet.prosody is not None
        assert loud.prosody.loudness_db > quiet.prosody.loudness_db + 10
        assert loud.prosody.syllables_per_s > quiet.prosody.syllables_per_s * 1.3


@needs_espeak
def test_negative_words_are_sad_when_calm_and_angry_when_loud_and_fast(
    heuristic: HeuristicEmotion,
) -> None:
    assert _valid(heuristic.classify(*calm(NEGATIVE), NEGATIVE)).label == "sad"
    assert _valid(heuristic.classify(*excited(NEGATIVE), NEGATIVE)).label == "angry"


@needs_espeak
def test_the_same_input_gives_the_same_result(heuristic: HeuristicEmotion) -> None:
    samples, rate = _speech(POSITIVE, VOICE_A, 150)
    first = heuristic.classify(samples, rate, POSITIVE)
    assert first == heuristic.classify(samples.copy(), rate, POSITIVE)
    assert first == HeuristicEmotion().classify(samples, rate, POSITIVE)


@needs_espeak
def test_the_heuristic_is_fast(heuristic: HeuristicEmotion) -> None:
    samples, rate = _speech(NEUTRAL * 3, VOICE_A, 150)
    seconds = len(samples) / rate
    heuristic.classify(samples, rate, NEUTRAL * 3)
    start = time.perf_counter()
    for _ in range(5):
        heuristic.classify(samples, rate, NEUTRAL * 3)
    per_second_ms = (time.perf_counter() - start) / 5 / seconds * 1000
    # About 1 ms per second of audio; the bound leaves room for a busy CI machine.
    assert per_second_ms < 10.0


# --- edges ------------------------------------------------------------------------------------


def test_silence_and_very_short_audio_give_no_emotion(heuristic: HeuristicEmotion) -> None:
    rate = 16_000
    assert heuristic.classify(np.zeros(rate * 2, np.float32), rate, "hello there") is None
    assert heuristic.classify(np.zeros(0, np.float32), rate, "hello") is None
    assert heuristic.classify(np.zeros(10, np.float32), rate, "") is None
    # 0.1 s of loud tone: real sound, too short to judge.
    t = np.arange(int(0.1 * rate)) / rate
    blip = (0.5 * np.sin(2 * np.pi * 180 * t)).astype(np.float32)
    assert heuristic.classify(blip, rate, "yes, great") is None
    # Near-silent hiss (below -55 dBFS) is silence too.
    hiss = np.random.default_rng(0).normal(0, 1e-4, rate).astype(np.float32)
    assert heuristic.classify(hiss, rate, "wonderful") is None


@needs_espeak
def test_speech_without_text_is_neutral_with_a_low_score(heuristic: HeuristicEmotion) -> None:
    samples, rate = _speech(POSITIVE, VOICE_A, 150)
    for text in ("", "   ", "..."):
        emotion = _valid(heuristic.classify(samples, rate, text))
        assert (emotion.label, emotion.score) == ("neutral", 0.2)


@needs_espeak
def test_speech_surrounded_by_silence_measures_like_the_speech_alone() -> None:
    samples, rate = _speech(NEUTRAL, VOICE_A, 150)
    padded = np.concatenate([np.zeros(rate, np.float32), samples, np.zeros(2 * rate, np.float32)])
    alone = measure_prosody(samples, rate, NEUTRAL)
    framed = measure_prosody(padded, rate, NEUTRAL)
    assert alone is not None and framed is not None
    assert abs(alone.duration_s - framed.duration_s) < 0.05
    assert abs(alone.loudness_db - framed.loudness_db) < 0.5


def test_bad_input_is_refused_and_non_finite_samples_are_tolerated(
    heuristic: HeuristicEmotion,
) -> None:
    with pytest.raises(ValueError, match="mono"):
        heuristic.classify(np.zeros((2, 16_000), np.float32), 16_000, "hi")
    with pytest.raises(ValueError, match="sample_rate"):
        heuristic.classify(np.zeros(16_000, np.float32), 0, "hi")
    rate = 16_000
    t = np.arange(rate) / rate
    tone = (0.3 * np.sin(2 * np.pi * 150 * t)).astype(np.float32)
    tone[100] = np.nan
    _valid(heuristic.classify(tone, rate, "a steady hum"))


def test_labels_and_scores_follow_the_documented_rule() -> None:
    assert label_of(0.9, 0.8)[0] == "happy"
    assert label_of(0.1, 0.8)[0] == "happy"
    assert label_of(0.9, -0.8)[0] == "angry"
    assert label_of(0.2, -0.8)[0] == "sad"
    assert label_of(0.5, 0.0)[0] == "neutral"
    assert label_of(0.9, None) == ("neutral", 0.2)
    # Stronger sentiment → surer; the heuristic is never fully sure.
    assert label_of(0.5, 0.9)[1] > label_of(0.5, 0.2)[1]
    assert all(label_of(a, v)[1] <= 0.9 for a in (0.0, 1.0) for v in (-1.0, 1.0))


def test_syllable_count_is_roughly_right() -> None:
    assert count_syllables("wonderful") == 3
    assert count_syllables("The meeting is at nine") == 6
    assert count_syllables("") == 0
    assert count_syllables("42") == 2


def test_a_call_baseline_moves_halfway_to_the_calls_own_prosody() -> None:
    from audio_pipeline.emotion.heuristic import Prosody

    loud = Prosody(2.0, -12.0, 120.0, 2.5, 0.5, 4.5)
    default = Baseline()
    assert call_baseline([loud, loud]) == default  # too few segments: defaults
    base = call_baseline([loud, loud, loud, None])
    assert base.loudness_db == pytest.approx((default.loudness_db - 12.0) / 2)
    # A call that is loud throughout is less aroused against its own baseline.
    assert arousal_of(loud, base) < arousal_of(loud, default)


@needs_espeak
def test_classify_many_classifies_each_segment_of_a_call(heuristic: HeuristicEmotion) -> None:
    segments = [
        (*_speech(POSITIVE, VOICE_A, 150), POSITIVE),
        (*_speech(NEGATIVE, VOICE_B, 150), NEGATIVE),
        (*_speech(NEUTRAL, VOICE_A, 150), NEUTRAL),
        (np.zeros(100, np.float32), 22_050, "hmm"),
    ]
    emotions = heuristic.classify_many(segments)
    assert [e.label if e else None for e in emotions] == ["happy", "sad", "neutral", None]
    for emotion in emotions[:3]:
        _valid(emotion)


# --- backends and the factory ----------------------------------------------------------------


def test_the_factory_returns_the_configured_backend(monkeypatch) -> None:
    emotion = create_emotion(_settings())
    assert isinstance(emotion, HeuristicEmotion)
    assert isinstance(emotion, SpeechEmotion)
    assert (emotion.name, emotion.engine) == ("heuristic", "heuristic")

    monkeypatch.setenv(BACKEND_SETTING, "emotion2vec")
    monkeypatch.setattr(e2v, "missing_packages", list)
    chosen = create_emotion(Settings(allow_insecure_no_token=True))
    assert isinstance(chosen, e2v.Emotion2VecEmotion)
    assert isinstance(chosen, SpeechEmotion)
    assert chosen.name == "emotion2vec"
    assert chosen.engine == "emotion2vec_plus_large"  # never "heuristic", never loaded yet


def test_emotion2vec_without_funasr_is_a_clear_error_naming_the_setting() -> None:
    if "funasr" not in e2v.missing_packages():
        pytest.skip("funasr is installed here")
    with pytest.raises(EmotionBackendUnavailable) as info:
        create_emotion(_settings(emotion_backend="emotion2vec"))
    assert isinstance(info.value, BackendUnavailableError)
    message = str(info.value)
    assert BACKEND_SETTING in message
    assert "funasr" in message
    assert "heuristic" in message  # says how to get going without it


def test_emotion2vec_uses_a_local_model_folder_when_there_is_one(tmp_path) -> None:
    assert e2v.model_source(tmp_path) == "iic/emotion2vec_plus_large"
    (tmp_path / "emotion2vec_plus_large").mkdir()
    assert e2v.model_source(tmp_path) == str(tmp_path / "emotion2vec_plus_large")
    assert e2v.engine_name(str(tmp_path / "emotion2vec_plus_large")) == "emotion2vec_plus_large"


class FakeAutoModelDouble:
    """Test double of funasr's AutoModel: answers like emotion2vec+ (bilingual labels)."""

    RAW = (
        "生气/angry",
        "厌恶/disgusted",
        "恐惧/fearful",
        "开心/happy",
        "中立/neutral",
        "其他/other",
        "难过/sad",
        "吃惊/surprised",
        "<unk>",
    )

    def __init__(self, scores: list[float]) -> None:
        self.scores = scores
        self.inputs: list[np.ndarray] = []

    def generate(self, audio: np.ndarray, **kwargs: object) -> list[dict[str, object]]:
        assert kwargs["granularity"] == "utterance"
        self.inputs.append(audio)
        return [{"key": "rand_key_x", "labels": self.RAW, "scores": self.scores}]


def test_emotion2vec_results_map_onto_the_shared_labels(monkeypatch) -> None:
    monkeypatch.setattr(e2v, "missing_packages", list)
    backend = e2v.Emotion2VecEmotion()
    # "other" 0.3 + "<unk>" 0.25 fold together and beat "happy" 0.4.
    double = FakeAutoModelDouble([0.0, 0.0, 0.05, 0.4, 0.0, 0.3, 0.0, 0.0, 0.25])
    backend._auto_model = double
    rate = 22_050
    t = np.arange(rate) / rate
    tone = (0.3 * np.sin(2 * np.pi * 150 * t)).astype(np.float32)
    emotion = backend.classify(tone, rate, "ignored")
    assert emotion == Emotion(label="other", score=0.55, engine="emotion2vec_plus_large")
    assert double.inputs[0].dtype == np.float32
    assert abs(len(double.inputs[0]) - 16_000) <= 1  # resampled to the model's 16 kHz
    # Too short for either backend: the model is not asked.
    assert backend.classify(tone[:1000], rate, "") is None
    assert len(double.inputs) == 1


def test_shared_label_mapping() -> None:
    assert [shared_label(raw) for raw in FakeAutoModelDouble.RAW] == [
        "angry",
        "disgusted",
        "fearful",
        "happy",
        "neutral",
        "other",
        "sad",
        "surprised",
        "other",
    ]
    assert shared_label("Sadness") == "sad"
    assert shared_label("something new") == "other"
    assert set(map(shared_label, FakeAutoModelDouble.RAW)) == set(LABELS)
