"""Moonshine, Annie's embedded speech to text, on its real bundled files (moonshine-cpp's
ORT-format model run by onnxruntime): questions spoken by hibari come back as their words,
edge-length audio, the English-only check, the tokenizer format and the pinned hashes."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import numpy as np
import pytest
import soxr
from annie_doubles import TOKEN

from annie_voice.config import Settings
from annie_voice.voice import stt_moonshine
from annie_voice.voice.bundled import MOONSHINE_BASE_EN
from annie_voice.voice.errors import VoiceBackendError
from annie_voice.voice.stt import STT_SAMPLE_RATE, make_recognizer
from annie_voice.voice.stt_moonshine import MoonshineRecognizer, detokenize, read_tokenizer
from annie_voice.voice.tts import TTS_SAMPLE_RATE, SpeechSynth
from her_os_shared.bundled import ModelIntegrityError, verified_path

QUESTIONS = {
    "Where is Priya moving to?": ["where", "priya", "moving"],
    "What did Arjun say about the dentist appointment?": ["dentist", "appointment"],
    "Remind me what we decided about the budget on Tuesday.": ["budget", "tuesday"],
}


@pytest.fixture(scope="module")
def recognizer() -> MoonshineRecognizer:
    made = make_recognizer(Settings(internal_token=TOKEN))
    assert isinstance(made, MoonshineRecognizer)  # the default backend
    return made


@pytest.fixture(scope="module")
def synth() -> SpeechSynth:
    return SpeechSynth(Settings(internal_token=TOKEN))


def spoken(synth: SpeechSynth, text: str) -> np.ndarray:
    audio = np.concatenate(synth.sentences(text))
    return soxr.resample(audio, TTS_SAMPLE_RATE, STT_SAMPLE_RATE).astype(np.float32)


def words(text: str) -> str:
    return "".join(c for c in text.lower() if c.isalnum() or c == " ")


def test_spoken_questions_come_back_as_their_words(
    recognizer: MoonshineRecognizer, synth: SpeechSynth
) -> None:
    for question, keys in QUESTIONS.items():
        text, language = recognizer.transcribe(spoken(synth, question))
        assert language == "en"
        assert all(k in words(text) for k in keys), (question, text)


def test_concurrent_sessions_transcribe_at_once(
    recognizer: MoonshineRecognizer, synth: SpeechSynth
) -> None:
    clips = {q: spoken(synth, q) for q in QUESTIONS}
    results: dict[str, str] = {}

    def run(question: str) -> None:
        results[question] = recognizer.transcribe(clips[question])[0]

    threads = [threading.Thread(target=run, args=(q,)) for q in clips]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for question, keys in QUESTIONS.items():
        assert all(k in words(results[question]) for k in keys), (question, results[question])


def test_empty_tiny_and_silent_audio(recognizer: MoonshineRecognizer) -> None:
    assert recognizer.transcribe(np.zeros(0, np.float32)) == ("", "en")
    # 50 ms is padded to the encoder's minimum instead of failing in its convolutions;
    # silence is heard as nothing (no invented words).
    assert recognizer.transcribe(np.zeros(800, np.float32)) == ("", "en")
    assert recognizer.transcribe(np.zeros(3 * STT_SAMPLE_RATE, np.float32)) == ("", "en")


def test_a_segment_longer_than_the_model_window_is_cut_into_pieces(
    recognizer: MoonshineRecognizer, synth: SpeechSynth, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = spoken(synth, "Where is Priya moving to?")
    second = spoken(synth, "Remind me what we decided about the budget on Tuesday.")
    gap = np.zeros(STT_SAMPLE_RATE // 2, np.float32)
    clip = np.concatenate([first, gap, second])
    # A window shorter than the clip: it is cut into two equal pieces (inside the second
    # question), each transcribed, the texts joined in order.
    monkeypatch.setattr(stt_moonshine, "MAX_SECONDS", (first.size + gap.size) / STT_SAMPLE_RATE)
    text = words(recognizer.transcribe(clip)[0])
    assert "priya" in text and "budget" in text and text.index("priya") < text.index("budget")


def test_the_tokenizer_file_and_byte_fallback() -> None:
    pieces = read_tokenizer(verified_path(MOONSHINE_BASE_EN["tokenizer"]))
    assert len(pieces) == 32000 and pieces[:3] == [b"<unk>", b"<s>", b"</s>"]
    assert pieces[3 + 0x41] == b"A"  # ids 3..258: the raw bytes
    hello = [i for i, p in enumerate(pieces) if p == "\u2581hello".encode()]
    # "é" through byte fallback (two raw bytes), and specials dropped.
    ids = [1, *hello, 3 + 0xC3, 3 + 0xA9, 2]
    assert detokenize(ids, pieces) == "helloé"


def test_a_truncated_tokenizer_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "tokenizer.bin"
    bad.write_bytes(b"\x05<unk>\x09<s")
    with pytest.raises(ModelIntegrityError, match="truncated token 1"):
        read_tokenizer(bad)


def test_moonshine_is_english_only_and_says_which_setting() -> None:
    settings = Settings(internal_token=TOKEN, stt_language="de")
    with pytest.raises(VoiceBackendError, match="ANNIE_VOICE_STT_LANGUAGE=de") as err:
        make_recognizer(settings).check()
    assert "ANNIE_VOICE_STT_BACKEND=faster-whisper" in str(err.value)
    make_recognizer(Settings(internal_token=TOKEN, stt_language=None)).check()


def test_a_changed_model_file_is_refused_on_load(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = MOONSHINE_BASE_EN["encoder"]
    wrong = dataclasses.replace(spec, sha256="0" * 64)
    monkeypatch.setitem(MOONSHINE_BASE_EN, "encoder", wrong)
    with pytest.raises(ModelIntegrityError, match="corrupt or not the pinned version"):
        MoonshineRecognizer(Settings(internal_token=TOKEN)).load()


def test_the_bundled_files_match_their_records() -> None:
    for spec in MOONSHINE_BASE_EN.values():
        assert verified_path(spec).is_file()


def test_where_moonshine_has_no_wheel_the_default_is_whisper_and_moonshine_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from annie_voice import config

    monkeypatch.setattr(config.platform, "machine", lambda: "aarch64")
    assert Settings(internal_token=TOKEN).stt_backend == "faster-whisper"
    settings = Settings(internal_token=TOKEN, stt_backend="moonshine")
    with pytest.raises(VoiceBackendError, match="Linux x86_64 only") as err:
        make_recognizer(settings).check()
    assert "ANNIE_VOICE_STT_BACKEND=faster-whisper" in str(err.value)
