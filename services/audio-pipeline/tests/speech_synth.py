"""Test speech made by the tests themselves: espeak-ng (Debian package, installed by
scripts/bootstrap.sh) speaks text to a WAV, in distinct voices. Real audio for real inference,
with no data set and no download."""

from __future__ import annotations

import io
import shutil
import subprocess
import wave

import numpy as np

# Two voices a speaker embedder should tell apart (different voice definitions, not just a
# pitch shift of one voice).
VOICE_A = "en-us+m7"
VOICE_B = "en-gb-x-rp+f4"
# Two more for meetings of three and four: CAM++ puts them at most 0.35 alike to A and B and
# to each other (the whispering variant has no voicing at all).
VOICE_C = "en+klatt2"
VOICE_D = "en-us+whisperf"


def have_espeak() -> bool:
    return shutil.which("espeak-ng") is not None


def speak(text: str, voice: str = VOICE_A, *, speed: int = 150) -> tuple[np.ndarray, int]:
    """(float32 mono samples in [-1, 1], sample rate) of `text` spoken by espeak-ng."""
    wav = subprocess.run(
        ["espeak-ng", "-v", voice, "-s", str(speed), "--stdout", text],
        check=True,
        capture_output=True,
    ).stdout
    with wave.open(io.BytesIO(wav)) as w:
        rate = w.getframerate()
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    return pcm.astype(np.float32) / 32768.0, rate


def silence(seconds: float, rate: int) -> np.ndarray:
    return np.zeros(int(seconds * rate), dtype=np.float32)


def to_wav_bytes(samples: np.ndarray, rate: int) -> bytes:
    """PCM16 mono WAV of float samples."""
    pcm = (np.clip(samples, -1.0, 1.0) * 32767).astype("<i2")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())
    return buf.getvalue()


def conversation(
    turns: list[tuple[str, str]], gap_s: float = 0.6
) -> tuple[np.ndarray, int, list[tuple[str, float, float]]]:
    """Turns of (voice, text) one after another with gaps; returns the samples, the rate and
    the reference (voice, start, end) of each turn."""
    parts: list[np.ndarray] = []
    ref: list[tuple[str, float, float]] = []
    rate = 22050
    t = 0.0
    for voice, text in turns:
        samples, rate = speak(text, voice)
        parts.append(samples)
        ref.append((voice, t, t + len(samples) / rate))
        t += len(samples) / rate
        parts.append(silence(gap_s, rate))
        t += gap_s
    return np.concatenate(parts), rate, ref


# A four-line exchange of the two voices (A, B, A, B).
DIALOGUE = [
    (VOICE_A, "Hi there, did you manage to finish the report for the meeting?"),
    (VOICE_B, "Almost, I still need to add the budget numbers from last quarter."),
    (VOICE_A, "Great, send it over when it is ready and I will take a look."),
    (VOICE_B, "Sure, I will email it to you before lunch tomorrow."),
]

# Ten lines for a meeting: voices take them in turn.
MEETING = [
    "Did everyone get the agenda for this morning?",
    "Yes, I printed copies for the whole group.",
    "I only saw it on my phone, the attachment was huge.",
    "Then let us start with the budget, it is the longest item.",
    "Before that, can we fix the date of the next review?",
    "Thursday works for me, anything after two.",
    "Thursday is fine, I will book the big room upstairs.",
    "Good, and the budget figures came in yesterday evening.",
    "Great, so we can finally close the quarter today.",
    "I will send the summary to everyone after lunch.",
]


def meeting(voices: list[str]) -> list[tuple[str, str]]:
    """The meeting's lines, spoken by `voices` in turn."""
    return [(voices[i % len(voices)], line) for i, line in enumerate(MEETING)]


def speech16k(text: str, voice: str = VOICE_A) -> np.ndarray:
    """`text` spoken by espeak-ng, resampled to 16 kHz float32."""
    import soxr

    samples, rate = speak(text, voice)
    return soxr.resample(samples, rate, 16_000).astype(np.float32)


def talk(
    parts: list[tuple[str, str]], gap_s: float
) -> tuple[np.ndarray, list[tuple[str, float, float]]]:
    """16 kHz lines one after another with `gap_s` between them (negative: overlapping, two
    voices at once), and the reference (voice, start, end) of each line's voiced part."""
    rate = 16000
    pieces = [(v, speech16k(t, v)) for v, t in parts]
    total = sum(len(p) for _, p in pieces) + int(gap_s * rate) * (len(pieces) - 1)
    out = np.zeros(total + rate, dtype=np.float32)
    ref, at = [], 0
    for v, p in pieces:
        out[at : at + len(p)] += p
        voiced = np.flatnonzero(np.abs(p) > 0.01)
        ref.append((v, (at + voiced[0]) / rate, (at + voiced[-1]) / rate))
        at += len(p) + int(gap_s * rate)
    return out, ref
