"""Audio in: WAV uploads and raw PCM16 wearable chunks → 16 kHz float32 mono clips.

Every backend (VAD, STT, speakers, emotion) takes an `AudioClip`, so decoding, downmixing
and resampling happen once, here. Input is untrusted: everything that can go wrong raises
`AudioError` with an HTTP status and a reason a client can act on, never anything else.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
import soundfile as sf
import soxr

# Whisper, Silero and the speaker/emotion models all expect 16 kHz mono.
SAMPLE_RATE = 16_000

# Sample rates outside this range are either corrupt headers or nothing a microphone makes;
# refusing them also keeps soxr away from absurd ratios.
MIN_SAMPLE_RATE = 4_000
MAX_SAMPLE_RATE = 384_000
MAX_CHANNELS = 32

# Linear PCM and IEEE float WAV only: every recorder and wearable produces one of these, and
# compressed WAV payloads (ADPCM, MP3-in-WAV, GSM, ...) would widen libsndfile's attack surface.
_SUPPORTED_SUBTYPES = frozenset({"PCM_U8", "PCM_16", "PCM_24", "PCM_32", "FLOAT", "DOUBLE"})
_WAV_CONTAINERS = frozenset({"WAV", "WAVEX", "RF64"})

# Magic numbers of formats people send by mistake, so the 415 can say what we got.
_OTHER_FORMATS: tuple[tuple[bytes, str], ...] = (
    (b"fLaC", "FLAC"),
    (b"OggS", "Ogg"),
    (b"ID3", "MP3"),
    (b"\xff\xfb", "MP3"),
    (b"\xff\xf3", "MP3"),
    (b"\xff\xf2", "MP3"),
    (b"FORM", "AIFF"),
    (b"\x1aE\xdf\xa3", "WebM/Matroska"),
    (b"caff", "CAF"),
    (b".snd", "AU"),
)


class AudioError(Exception):
    """Audio that cannot be used; `status_code` is the HTTP status to answer with."""

    def __init__(self, status_code: int, reason: str) -> None:
        super().__init__(reason)
        self.status_code = status_code
        self.reason = reason


@dataclass(frozen=True, slots=True, eq=False)
class AudioClip:
    """Mono float32 samples at 16 kHz (nominally in [-1, 1])."""

    samples: np.ndarray
    sample_rate: int = SAMPLE_RATE

    def __post_init__(self) -> None:
        if self.samples.ndim != 1 or self.samples.dtype != np.float32:
            raise ValueError("AudioClip samples must be a 1-D float32 array")
        if self.sample_rate != SAMPLE_RATE:
            raise ValueError(f"AudioClip is always {SAMPLE_RATE} Hz, got {self.sample_rate}")

    @property
    def duration_s(self) -> float:
        return len(self.samples) / self.sample_rate

    def slice(self, start_s: float, end_s: float) -> AudioClip:
        """The part between two times in seconds (clamped to the clip)."""
        a = max(0, min(len(self.samples), round(start_s * self.sample_rate)))
        b = max(a, min(len(self.samples), round(end_s * self.sample_rate)))
        return AudioClip(self.samples[a:b])


def _sniff(data: bytes) -> None:
    """Refuse anything that is not a RIFF/RF64 WAVE before libsndfile parses it."""
    if len(data) >= 12 and data[:4] in (b"RIFF", b"RIFX", b"RF64") and data[8:12] == b"WAVE":
        return
    for magic, name in _OTHER_FORMATS:
        if data.startswith(magic):
            raise AudioError(415, f"unsupported audio format: {name}; send a WAV file")
    if data[:4] in (b"RIFF", b"RIFX", b"RF64") and len(data) < 12:
        raise AudioError(400, f"corrupt WAV: {len(data)} bytes is too short for a WAV header")
    if data[:4] in (b"RIFF", b"RIFX", b"RF64"):
        raise AudioError(415, "unsupported audio format: a RIFF file that is not WAVE")
    raise AudioError(400, "not audio: the body does not start with a RIFF/WAVE header")


def _to_clip(samples: np.ndarray, rate: int) -> AudioClip:
    """Downmix (frames × channels or 1-D) and resample to a 16 kHz float32 clip."""
    if not np.isfinite(samples).all():
        raise AudioError(400, "corrupt audio: samples contain NaN or infinite values")
    # Float WAVs may exceed full scale; anything past ±1 is clipping on any real output, and
    # bounding it keeps the downmix and resampler finite on hostile values like 3e38.
    samples = np.clip(samples, -1.0, 1.0)
    if samples.ndim == 2:
        # Mean of channels: no channel is privileged, and it cannot clip.
        samples = samples.mean(axis=1, dtype=np.float32)
    samples = np.ascontiguousarray(samples, dtype=np.float32)
    if rate != SAMPLE_RATE:
        samples = soxr.resample(samples, rate, SAMPLE_RATE, quality="HQ")
        samples = np.ascontiguousarray(samples, dtype=np.float32)
    if samples.size == 0:
        raise AudioError(422, "zero-length audio: the file holds no samples")
    return AudioClip(samples)


def _check_rate(rate: int) -> None:
    if not MIN_SAMPLE_RATE <= rate <= MAX_SAMPLE_RATE:
        raise AudioError(
            415,
            f"unsupported sample rate {rate} Hz "
            f"(supported: {MIN_SAMPLE_RATE}–{MAX_SAMPLE_RATE} Hz)",
        )


def _check_length(frames: int, rate: int, max_seconds: float) -> None:
    if frames == 0:
        raise AudioError(422, "zero-length audio: the file holds no samples")
    seconds = frames / rate
    if seconds > max_seconds:
        raise AudioError(
            413, f"audio too long: {seconds:.1f} s exceeds the limit of {max_seconds:g} s"
        )


def decode_audio(data: bytes, *, max_seconds: float) -> AudioClip:
    """A WAV upload (PCM 8/16/24/32-bit or float, any rate, any channel count) as a clip.

    The header is checked (format, rate, channels, length) before any sample is decoded, and
    at most the frames the header announces are read.
    """
    if not data:
        raise AudioError(400, "empty body: expected a WAV file")
    _sniff(data)
    try:
        f = sf.SoundFile(io.BytesIO(data))
    except Exception as exc:  # libsndfile reports every parse failure as one error type
        raise AudioError(400, f"corrupt WAV: {_libsndfile_reason(exc)}") from None
    with f:
        if f.format not in _WAV_CONTAINERS:
            raise AudioError(415, f"unsupported audio format: {f.format}; send a WAV file")
        if f.subtype not in _SUPPORTED_SUBTYPES:
            raise AudioError(
                415,
                f"unsupported WAV encoding {f.subtype}; send PCM 16/24/32-bit or float WAV",
            )
        if not 1 <= f.channels <= MAX_CHANNELS:
            raise AudioError(415, f"unsupported channel count {f.channels} (1–{MAX_CHANNELS})")
        _check_rate(f.samplerate)
        _check_length(f.frames, f.samplerate, max_seconds)
        try:
            samples = f.read(frames=f.frames, dtype="float32", always_2d=True)
        except Exception as exc:
            raise AudioError(400, f"corrupt WAV: {_libsndfile_reason(exc)}") from None
        rate = f.samplerate
    if samples.shape[0] == 0:
        raise AudioError(400, "corrupt WAV: the header announces samples the file does not hold")
    return _to_clip(samples, rate)


def pcm16_to_clip(data: bytes, sample_rate: int, *, max_seconds: float | None = None) -> AudioClip:
    """Raw little-endian PCM16 mono (a wearable's 8 or 16 kHz chunk) as a clip."""
    if not data:
        raise AudioError(400, "empty body: expected raw PCM16 samples")
    if len(data) % 2:
        raise AudioError(400, f"not PCM16: odd byte count {len(data)} (samples are 2 bytes)")
    _check_rate(sample_rate)
    if max_seconds is not None:
        _check_length(len(data) // 2, sample_rate, max_seconds)
    pcm = np.frombuffer(data, dtype="<i2")
    return _to_clip(pcm.astype(np.float32) / 32768.0, sample_rate)


def _libsndfile_reason(exc: Exception) -> str:
    # LibsndfileError messages start with "Error opening <_io.BytesIO ...>:"; keep the cause.
    text = str(exc)
    return text.rsplit(": ", 1)[-1].strip() or type(exc).__name__
