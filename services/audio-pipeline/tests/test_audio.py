from __future__ import annotations

import io
import struct

import numpy as np
import pytest
import soundfile as sf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from speech_synth import to_wav_bytes

from audio_pipeline.audio import SAMPLE_RATE, AudioClip, AudioError, decode_audio, pcm16_to_clip


def sine(freq: float, seconds: float, rate: int, amp: float = 0.5) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (amp * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def wav(samples: np.ndarray, rate: int, subtype: str = "PCM_16", fmt: str = "WAV") -> bytes:
    buf = io.BytesIO()
    sf.write(buf, samples, rate, format=fmt, subtype=subtype)
    return buf.getvalue()


def peak_hz(clip: AudioClip) -> float:
    spectrum = np.abs(np.fft.rfft(clip.samples))
    return float(np.argmax(spectrum) * SAMPLE_RATE / len(clip.samples))


def reject(data: bytes, *, max_seconds: float = 60.0) -> AudioError:
    with pytest.raises(AudioError) as info:
        decode_audio(data, max_seconds=max_seconds)
    return info.value


@pytest.mark.parametrize("subtype", ["PCM_16", "PCM_24", "PCM_32", "FLOAT", "PCM_U8", "DOUBLE"])
def test_every_linear_wav_encoding_decodes_to_the_same_samples(subtype: str) -> None:
    x = sine(440, 1.0, SAMPLE_RATE)
    clip = decode_audio(wav(x, SAMPLE_RATE, subtype), max_seconds=10)
    assert clip.samples.dtype == np.float32 and clip.sample_rate == SAMPLE_RATE
    assert clip.duration_s == pytest.approx(1.0)
    tolerance = 1e-2 if subtype == "PCM_U8" else 1e-4
    assert np.max(np.abs(clip.samples - x)) < tolerance


@pytest.mark.parametrize("rate", [8_000, 11_025, 22_050, 44_100, 48_000, 96_000])
def test_any_sample_rate_is_resampled_to_16k_keeping_pitch_and_duration(rate: int) -> None:
    clip = decode_audio(wav(sine(440, 2.0, rate), rate), max_seconds=10)
    assert clip.sample_rate == SAMPLE_RATE
    assert len(clip.samples) == pytest.approx(2 * SAMPLE_RATE, abs=2)
    assert peak_hz(clip) == pytest.approx(440, abs=2)
    assert 0.45 < np.max(np.abs(clip.samples[1000:-1000])) < 0.55


def test_stereo_is_downmixed_by_averaging_channels() -> None:
    left, right = sine(440, 1.0, 48_000), sine(1000, 1.0, 48_000)
    clip = decode_audio(wav(np.stack([left, right], axis=1), 48_000, "PCM_24"), max_seconds=10)
    spectrum = np.abs(np.fft.rfft(clip.samples))
    hz = np.fft.rfftfreq(len(clip.samples), 1 / SAMPLE_RATE)
    at = {f: spectrum[np.argmin(np.abs(hz - f))] for f in (440, 1000)}
    assert at[440] == pytest.approx(at[1000], rel=0.05)  # both channels, equal weight
    # Opposite-phase channels cancel: proof it is a mean, not "take the left channel".
    clip = decode_audio(wav(np.stack([left, -left], axis=1), 16_000), max_seconds=10)
    assert np.max(np.abs(clip.samples)) < 1e-3


def test_multichannel_is_downmixed() -> None:
    x = np.tile(sine(300, 0.5, 22_050)[:, None], (1, 6))
    clip = decode_audio(wav(x, 22_050, "FLOAT"), max_seconds=10)
    assert clip.duration_s == pytest.approx(0.5, abs=1e-3)
    assert peak_hz(clip) == pytest.approx(300, abs=3)


def test_the_espeak_style_pcm16_helper_wav_decodes() -> None:
    clip = decode_audio(to_wav_bytes(sine(200, 1.5, 22_050), 22_050), max_seconds=10)
    assert clip.duration_s == pytest.approx(1.5, abs=1e-3)


def test_empty_body_is_rejected() -> None:
    err = reject(b"")
    assert (err.status_code, err.reason) == (400, "empty body: expected a WAV file")


@pytest.mark.parametrize("body", [b"hello world, not audio at all", b"\x00" * 100, b"\xff"])
def test_non_audio_is_rejected_as_not_audio(body: bytes) -> None:
    err = reject(body)
    assert err.status_code == 400 and err.reason.startswith("not audio")


def test_corrupt_wav_says_what_is_wrong() -> None:
    good = wav(sine(440, 1.0, 16_000), 16_000)
    err = reject(good[:6])
    assert err.reason == "corrupt WAV: 6 bytes is too short for a WAV header"
    err = reject(good[:30])  # header cut before the data chunk
    assert err.status_code == 400 and "corrupt WAV" in err.reason and "data" in err.reason
    no_channels = good[:22] + struct.pack("<H", 0) + good[24:]
    err = reject(no_channels)
    assert err.status_code == 400 and "corrupt WAV" in err.reason and "hannel" in err.reason


def test_nan_samples_are_rejected() -> None:
    x = sine(440, 0.5, 16_000)
    x[100] = np.nan
    err = reject(wav(x, 16_000, "FLOAT"))
    assert err.status_code == 400 and "NaN" in err.reason


def test_float_samples_beyond_full_scale_are_clipped() -> None:
    x = np.full((1_000, 2), 3e38, dtype=np.float32)
    x[::2] = -2.0
    clip = decode_audio(wav(x, 44_100, "FLOAT"), max_seconds=10)
    assert np.isfinite(clip.samples).all() and np.max(np.abs(clip.samples)) < 1.2


@pytest.mark.parametrize("frames", [0, 1])  # one frame at 48 kHz is zero frames at 16 kHz
def test_zero_length_audio_is_rejected(frames: int) -> None:
    err = reject(wav(np.zeros(frames, dtype=np.float32), 48_000))
    assert err.status_code == 422 and err.reason.startswith("zero-length audio")


def test_too_long_audio_is_rejected_with_the_limit() -> None:
    err = reject(wav(np.zeros(16_000 * 3, dtype=np.float32), 16_000), max_seconds=2.5)
    assert err.status_code == 413
    assert err.reason == "audio too long: 3.0 s exceeds the limit of 2.5 s"


def test_too_long_audio_is_rejected_from_the_header_without_decoding(monkeypatch) -> None:
    def no_read(*args, **kwargs):
        raise AssertionError("samples were decoded")

    monkeypatch.setattr(sf.SoundFile, "read", no_read)
    assert reject(wav(np.zeros(16_000 * 3), 16_000), max_seconds=1).status_code == 413


def test_other_containers_are_unsupported_and_named() -> None:
    x = sine(440, 0.5, 16_000)
    err = reject(wav(x, 16_000, "PCM_16", fmt="FLAC"))
    assert (err.status_code, err.reason) == (415, "unsupported audio format: FLAC; send a WAV file")
    err = reject(wav(x, 16_000, "VORBIS", fmt="OGG"))
    assert err.status_code == 415 and "Ogg" in err.reason
    err = reject(b"ID3\x04\x00" + b"\x00" * 200)
    assert err.status_code == 415 and "MP3" in err.reason
    err = reject(b"RIFF\x10\x00\x00\x00AVI LIST" + b"\x00" * 100)
    assert err.status_code == 415 and "not WAVE" in err.reason


@pytest.mark.parametrize("subtype", ["ULAW", "ALAW", "IMA_ADPCM", "GSM610"])
def test_compressed_wav_encodings_are_unsupported_and_named(subtype: str) -> None:
    err = reject(wav(sine(440, 0.5, 8_000), 8_000, subtype))
    assert err.status_code == 415 and subtype in err.reason


def test_absurd_sample_rates_and_channel_counts_are_unsupported() -> None:
    good = wav(sine(440, 0.5, 16_000), 16_000)
    one_hz = good[:24] + struct.pack("<I", 1) + good[28:]
    err = reject(one_hz)
    assert err.status_code == 415 and "sample rate 1 Hz" in err.reason
    many = good[:22] + struct.pack("<H", 1000) + good[24:]
    err = reject(many)
    assert err.status_code == 415 and "channel count 1000" in err.reason


def test_pcm16_chunks_at_8k_and_16k() -> None:
    x = sine(440, 1.0, 8_000)
    pcm = (x * 32767).astype("<i2").tobytes()
    clip = pcm16_to_clip(pcm, 8_000)
    assert len(clip.samples) == 16_000 and peak_hz(clip) == pytest.approx(440, abs=2)
    clip = pcm16_to_clip(struct.pack("<3h", 0, 16384, -32768), 16_000)
    assert clip.samples.tolist() == [0.0, 0.5, -1.0]


def test_pcm16_rejections() -> None:
    with pytest.raises(AudioError) as info:
        pcm16_to_clip(b"", 16_000)
    assert info.value.status_code == 400 and "empty" in info.value.reason
    with pytest.raises(AudioError) as info:
        pcm16_to_clip(b"\x00\x01\x02", 16_000)
    assert info.value.status_code == 400 and "odd byte count 3" in info.value.reason
    with pytest.raises(AudioError) as info:
        pcm16_to_clip(b"\x00\x00", 0)
    assert info.value.status_code == 415
    with pytest.raises(AudioError) as info:
        pcm16_to_clip(b"\x00\x00" * 16_001, 8_000, max_seconds=2)
    assert info.value.status_code == 413 and "2 s" in info.value.reason


def test_clip_slice_is_clamped() -> None:
    clip = AudioClip(np.arange(16_000, dtype=np.float32))
    assert clip.slice(0.5, 0.75).samples[0] == 8_000 and clip.slice(0.5, 0.75).duration_s == 0.25
    assert clip.slice(-1, 99).duration_s == 1.0 and clip.slice(0.9, 0.1).duration_s == 0.0


# --- hostile input: anything other than an AudioClip or AudioError is a bug ---

_FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_BASES = (
    wav(np.stack([sine(440, 0.05, 44_100)] * 2, axis=1), 44_100, "PCM_24"),
    wav(sine(440, 0.05, 16_000), 16_000, "FLOAT"),  # mutations make NaN, inf, 3e38, ...
    wav(sine(440, 0.05, 8_000), 8_000, "PCM_U8", fmt="RF64"),
)


def _decode_or_audio_error(data: bytes) -> None:
    try:
        clip = decode_audio(data, max_seconds=5)
    except AudioError as err:
        assert err.status_code in (400, 413, 415, 422) and err.reason
    else:
        assert clip.samples.dtype == np.float32 and clip.samples.size > 0
        assert np.isfinite(clip.samples).all()


@_FUZZ
@given(st.binary(max_size=512))
def test_fuzz_random_bytes(data: bytes) -> None:
    _decode_or_audio_error(data)


@_FUZZ
@given(st.binary(max_size=512))
def test_fuzz_random_bytes_behind_a_wave_header(body: bytes) -> None:
    _decode_or_audio_error(b"RIFF" + struct.pack("<I", len(body) + 4) + b"WAVE" + body)


@_FUZZ
@given(
    st.sampled_from(_BASES),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=8),
    st.integers(0, 10_000),
)
def test_fuzz_mutated_and_truncated_wav(
    base: bytes, flips: list[tuple[int, int]], cut: int
) -> None:
    data = bytearray(base)
    for pos, value in flips:
        data[pos % len(data)] = value
    _decode_or_audio_error(bytes(data[:cut]))


@_FUZZ
@given(st.binary(max_size=256), st.integers(-(2**31), 2**31))
def test_fuzz_pcm16(data: bytes, rate: int) -> None:
    try:
        clip = pcm16_to_clip(data, rate, max_seconds=5)
    except AudioError as err:
        assert err.status_code in (400, 413, 415, 422)
    else:
        assert clip.samples.dtype == np.float32 and clip.samples.size > 0
