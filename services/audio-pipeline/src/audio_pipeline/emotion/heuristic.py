"""The embedded emotion backend: prosody for arousal, transcript sentiment for valence.

It is a heuristic and says so (engine "heuristic"). Per segment:

- prosody, measured on the audio resampled to 8 kHz: loudness (mean power of the active
  10 ms frames, dBFS), pitch spread (spread of a YIN f0 track, in semitones, so it does not
  depend on whether the voice is low or high) and speaking rate (syllables of the transcript,
  counted by vowel groups, per second of active speech);
- arousal in [0, 1]: each feature's distance from a baseline, weighted, through a logistic;
  0.5 means "as the baseline". The baseline is `Baseline()` (absolute defaults for
  conversational speech) for `classify`, and for `classify_many` halfway between those
  defaults and the call's own medians, so a hot microphone or a fast talker does not push a
  whole call towards angry (nor a quiet one towards sad);
- valence: VADER's compound score of the transcript in [-1, 1]; |compound| < 0.05 is neutral
  (VADER's own threshold).

Label: positive → happy; negative → angry with arousal ≥ 0.6, else sad; neither → neutral.
The score is the heuristic's confidence: it grows with |valence| and with how well arousal
fits the label, and never exceeds 0.9. With no transcript text the valence is unknown: the
label is neutral with score 0.2 (prosody alone cannot tell angry from happy). Under
`MIN_SPEECH_S` of active speech it returns None. Fearful, disgusted, surprised and other are
never produced (nothing here can tell them apart). VADER and the syllable count are
English-centric: other languages mostly come out neutral (no sentiment words, no rate).

Deterministic, numpy and soxr only; about 1 ms per second of audio on one core.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import soxr

from audio_pipeline.emotion import MIN_SPEECH_S, SegmentAudio, mono_samples
from her_os_shared.bundled import VADER
from her_os_shared.transcript import Emotion

ENGINE = "heuristic"

# Prosody is measured at 8 kHz: enough for f0 and speech loudness, cheap to analyse.
ANALYSIS_RATE = 8000
HOP = 80  # 10 ms loudness frames
PITCH_HOP = 160  # 20 ms f0 frames: plenty for a median and a spread, half the work
YIN_WINDOW = 256  # 32 ms: at least 1.6 periods of the lowest f0
F0_MIN_HZ = 50.0
F0_MAX_HZ = 500.0
YIN_THRESHOLD = 0.15
_TAU_MIN = int(ANALYSIS_RATE // F0_MAX_HZ)
_TAU_MAX = math.ceil(ANALYSIS_RATE / F0_MIN_HZ)
_YIN_FRAME = YIN_WINDOW + _TAU_MAX + 1
_YIN_FFT = 1 << (_YIN_FRAME - 1).bit_length()

# A 10 ms frame is active speech when louder than both of these: an absolute floor (below it
# is silence at any gain) and a floor relative to the segment's loud frames (room noise).
SILENCE_DB = -55.0
ACTIVE_BELOW_PEAK_DB = 35.0
# Fewer voiced frames than this and the pitch spread is not measured.
MIN_VOICED_FRAMES = 5

# Text caps: VADER time grows with length; a segment's sentiment is clear long before this.
MAX_TEXT_CHARS = 5_000
VALENCE_NEUTRAL = 0.05  # VADER's documented threshold for a neutral compound score
# Negative words need clearly raised arousal to be angry; at ordinary arousal they are sad.
ANGRY_AROUSAL = 0.6
MAX_SCORE = 0.9
NO_TEXT_SCORE = 0.2

# Feature weights of arousal and the distance counted as one unit of each.
_WEIGHTS = {"loudness": 0.45, "rate": 0.35, "pitch": 0.20}
_UNITS = {"loudness": 6.0, "rate": 1.0, "pitch": 1.5}  # dB, syllables/s, semitones
_AROUSAL_GAIN = 1.5
# Segments needed before a call's own medians join the baseline.
MIN_CALL_SEGMENTS = 3

_WORD = re.compile(r"[a-z]+(?:'[a-z]+)*|\d+")
_VOWEL_GROUP = re.compile(r"[aeiouy]+")


@dataclass(frozen=True)
class Prosody:
    """Prosodic measurements of one segment."""

    # Active speech, first to last active frame (seconds).
    duration_s: float
    # Mean power of the active frames, dBFS.
    loudness_db: float
    # Median f0 of the voiced frames and their spread (robust std of log-f0, semitones);
    # None with too few voiced frames.
    f0_median_hz: float | None
    pitch_spread_st: float | None
    voiced_fraction: float
    # Syllables of the transcript per second of active speech; None without (Latin) text.
    syllables_per_s: float | None


@dataclass(frozen=True)
class Baseline:
    """What "normal" prosody is; arousal measures the distance from it. The defaults fit
    conversational speech at a normal recording level."""

    loudness_db: float = -24.0
    syllables_per_s: float = 4.5
    pitch_spread_st: float = 2.5


@dataclass(frozen=True)
class Assessment:
    """Everything the heuristic decided for a segment (for tests, tuning and debugging)."""

    prosody: Prosody | None
    arousal: float | None
    valence: float | None
    emotion: Emotion | None


def estimate_f0(samples: np.ndarray, sample_rate: int) -> np.ndarray:
    """f0 (Hz) of each 20 ms hop, NaN where unvoiced or silent (YIN on 8 kHz audio)."""
    return _f0_track(_resample(mono_samples(samples, sample_rate), sample_rate))


def count_syllables(text: str) -> int:
    """Rough English syllable count: vowel groups per word (a final silent e dropped), at
    least one per word; a number counts one per digit."""
    total = 0
    for word in _WORD.findall(text.lower()):
        if word.isdigit():
            total += len(word)
            continue
        groups = len(_VOWEL_GROUP.findall(word))
        if word.endswith("e") and not word.endswith(("le", "ee")) and groups > 1:
            groups -= 1
        total += max(groups, 1)
    return total


def measure_prosody(samples: np.ndarray, sample_rate: int, text: str = "") -> Prosody | None:
    """Prosody of a segment; None with under `MIN_SPEECH_S` of active speech."""
    x = _resample(mono_samples(samples, sample_rate), sample_rate)
    n_blocks = len(x) // HOP
    if n_blocks == 0:
        return None
    power = np.mean(np.square(x[: n_blocks * HOP].reshape(n_blocks, HOP)), axis=1)
    db = 10.0 * np.log10(power + 1e-12)
    gate = max(SILENCE_DB, float(np.percentile(db, 95)) - ACTIVE_BELOW_PEAK_DB)
    active = np.flatnonzero(db > gate)
    if active.size == 0:
        return None
    first, last = int(active[0]), int(active[-1])
    duration = (last - first + 1) * HOP / ANALYSIS_RATE
    if duration < MIN_SPEECH_S:
        return None
    loudness = float(10.0 * np.log10(np.mean(power[active]) + 1e-12))

    # Pitch over the active span only (less work, no octave noise from the silence around).
    span = x[first * HOP : min(len(x), (last + 1) * HOP + _YIN_FRAME)]
    f0 = _f0_track(span, gate_db=gate)
    voiced = f0[np.isfinite(f0)]
    f0_median = spread = None
    if voiced.size >= MIN_VOICED_FRAMES:
        f0_median = float(np.median(voiced))
        semitones = 12.0 * np.log2(voiced / f0_median)
        p10, p90 = np.percentile(semitones, [10, 90])
        spread = float((p90 - p10) / 2.563)  # the 10-90 range of a normal is 2.563 std
    voiced_fraction = float(voiced.size / max(1, f0.size))

    syllables = count_syllables(text[:MAX_TEXT_CHARS])
    rate = syllables / duration if syllables else None
    return Prosody(duration, loudness, f0_median, spread, voiced_fraction, rate)


def arousal_of(prosody: Prosody, baseline: Baseline | None = None) -> float:
    """Arousal in [0, 1] of measured prosody; 0.5 is the baseline's."""
    base = baseline or Baseline()
    distances = {"loudness": prosody.loudness_db - base.loudness_db}
    if prosody.syllables_per_s is not None:
        # Clamp: a mis-timed or mis-transcribed segment must not dominate.
        distances["rate"] = float(np.clip(prosody.syllables_per_s - base.syllables_per_s, -3, 3))
    if prosody.pitch_spread_st is not None:
        distances["pitch"] = prosody.pitch_spread_st - base.pitch_spread_st
    weight = sum(_WEIGHTS[k] for k in distances)
    z = sum(_WEIGHTS[k] * d / _UNITS[k] for k, d in distances.items()) / weight
    return float(1.0 / (1.0 + math.exp(-_AROUSAL_GAIN * z)))


def call_baseline(prosodies: Sequence[Prosody | None]) -> Baseline:
    """Halfway between the default baseline and the medians of a call's segments (the
    defaults alone with fewer than `MIN_CALL_SEGMENTS` measurable segments)."""
    default = Baseline()
    measured = [p for p in prosodies if p is not None]
    if len(measured) < MIN_CALL_SEGMENTS:
        return default

    def blend(values: list[float], fallback: float) -> float:
        return 0.5 * (fallback + float(np.median(values))) if values else fallback

    return Baseline(
        loudness_db=blend([p.loudness_db for p in measured], default.loudness_db),
        syllables_per_s=blend(
            [p.syllables_per_s for p in measured if p.syllables_per_s is not None],
            default.syllables_per_s,
        ),
        pitch_spread_st=blend(
            [p.pitch_spread_st for p in measured if p.pitch_spread_st is not None],
            default.pitch_spread_st,
        ),
    )


def label_of(arousal: float, valence: float | None) -> tuple[str, float]:
    """(label, score) from arousal in [0, 1] and VADER compound valence (None: no text)."""
    if valence is None:
        return "neutral", NO_TEXT_SCORE
    strength = min(1.0, abs(valence))
    if valence >= VALENCE_NEUTRAL:
        label, fit = "happy", arousal
    elif valence <= -VALENCE_NEUTRAL:
        if arousal >= ANGRY_AROUSAL:
            label, fit = "angry", (arousal - ANGRY_AROUSAL) / (1.0 - ANGRY_AROUSAL)
        else:
            label, fit = "sad", (ANGRY_AROUSAL - arousal) / ANGRY_AROUSAL
    else:
        # Neutral text: surer the closer the voice is to its baseline.
        return "neutral", round(0.5 + 0.3 * (1.0 - min(1.0, 2.0 * abs(arousal - 0.5))), 4)
    score = 0.3 + 0.5 * strength + 0.2 * fit
    return label, round(min(MAX_SCORE, max(0.0, score)), 4)


class HeuristicEmotion:
    """The embedded `SpeechEmotion` backend (see the module docstring)."""

    name = "heuristic"
    engine = ENGINE

    def __init__(self) -> None:
        # The process's one analyser (lexicons hash-checked, loaded once); scoring is stateless.
        self._vader = VADER.get()

    def valence(self, text: str) -> float | None:
        """VADER compound score of `text` in [-1, 1]; None when there are no words."""
        text = text[:MAX_TEXT_CHARS]
        if not any(ch.isalnum() for ch in text):
            return None
        return float(self._vader.polarity_scores(text)["compound"])

    def assess(
        self, samples: np.ndarray, sample_rate: int, text: str, baseline: Baseline | None = None
    ) -> Assessment:
        prosody = measure_prosody(samples, sample_rate, text)
        return self._assess(prosody, text, baseline)

    def classify(self, samples: np.ndarray, sample_rate: int, text: str) -> Emotion | None:
        return self.assess(samples, sample_rate, text).emotion

    def classify_many(self, segments: Sequence[SegmentAudio]) -> list[Emotion | None]:
        prosodies = [measure_prosody(s, rate, text) for s, rate, text in segments]
        baseline = call_baseline(prosodies)
        return [
            self._assess(p, text, baseline).emotion
            for p, (_, _, text) in zip(prosodies, segments, strict=True)
        ]

    def _assess(self, prosody: Prosody | None, text: str, baseline: Baseline | None) -> Assessment:
        valence = self.valence(text)
        if prosody is None:
            return Assessment(None, None, valence, None)
        arousal = arousal_of(prosody, baseline)
        label, score = label_of(arousal, valence)
        return Assessment(
            prosody, arousal, valence, Emotion(label=label, score=score, engine=ENGINE)
        )


def _resample(x: np.ndarray, sample_rate: int) -> np.ndarray:
    if sample_rate == ANALYSIS_RATE or x.size == 0:
        return x.astype(np.float64)
    return soxr.resample(x, sample_rate, ANALYSIS_RATE, quality="LQ").astype(np.float64)


def _f0_track(x: np.ndarray, gate_db: float = SILENCE_DB) -> np.ndarray:
    """YIN (de Cheveigné & Kawahara 2002) over 20 ms hops of 8 kHz audio, all frames at once:
    difference function from an FFT cross-correlation and running energies, cumulative-mean
    normalisation, first dip under the threshold, parabolic refinement."""
    if x.size < _YIN_FRAME:
        return np.full(0, np.nan)
    frames = np.lib.stride_tricks.sliding_window_view(x, _YIN_FRAME)[::PITCH_HOP]
    spectrum = np.fft.rfft(frames, _YIN_FFT)
    corr = np.fft.irfft(np.conj(np.fft.rfft(frames[:, :YIN_WINDOW], _YIN_FFT)) * spectrum)
    # energy[:, k] = sum of the first k squared samples of each frame.
    energy = np.zeros((len(frames), _YIN_FRAME + 1))
    np.cumsum(np.square(frames), axis=1, out=energy[:, 1:])
    e_tau = energy[:, YIN_WINDOW : YIN_WINDOW + _TAU_MAX + 1] - energy[:, : _TAU_MAX + 1]
    diff = energy[:, [YIN_WINDOW]] + e_tau - 2.0 * corr[:, : _TAU_MAX + 1]
    np.maximum(diff, 0.0, out=diff)

    cum = np.cumsum(diff[:, 1:], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        cmnd = diff[:, 1:] * np.arange(1, _TAU_MAX + 1) / cum
    cmnd = np.where(np.isfinite(cmnd), cmnd, 1.0)
    # cmnd[:, k] is tau = k + 1; the search covers F0_MAX_HZ..F0_MIN_HZ.
    search = cmnd[:, _TAU_MIN - 1 : _TAU_MAX]
    below = search < YIN_THRESHOLD
    first = np.argmax(below, axis=1)
    idx = np.arange(search.shape[1])
    after = idx >= first[:, None]
    # The dip is the run of under-threshold values that starts at the first crossing.
    left_dip = np.cumsum(~below & after, axis=1) > 0
    best = np.argmin(np.where(below & after & ~left_dip, search, np.inf), axis=1)

    rows = np.arange(len(search))
    lo = search[rows, np.maximum(best - 1, 0)]
    mid = search[rows, best]
    hi = search[rows, np.minimum(best + 1, search.shape[1] - 1)]
    denom = lo - 2.0 * mid + hi
    interior = (best > 0) & (best < search.shape[1] - 1) & (denom > 0)
    shift = np.where(interior, 0.5 * (lo - hi) / np.where(denom > 0, denom, 1.0), 0.0)
    tau = _TAU_MIN + best + shift

    window_db = 10.0 * np.log10(energy[:, YIN_WINDOW] / YIN_WINDOW + 1e-12)
    voiced = below.any(axis=1) & (window_db > gate_db)
    return np.where(voiced, ANALYSIS_RATE / tau, np.nan)
