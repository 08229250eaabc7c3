"""Annie's model files are the pinned ones before anything reads them: Pipecat's Silero VAD
(which Pipecat would load unchecked), hibari's voice and everything hibari reads for it, and
Moonshine. A changed file stops the voice (503 on /start); the installed files are never
touched: tampered copies stand in for them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from annie_doubles import TOKEN, EngineDouble
from asgi_lifespan import LifespanManager
from pipecat.audio.vad import silero as pipecat_silero

from annie_voice.app import create_app
from annie_voice.config import Settings
from annie_voice.voice import bundled as annie_bundled
from annie_voice.voice.bundled import HIBARI_ASSETS, HIBARI_HEART, PIPECAT_SILERO_VAD
from annie_voice.voice.errors import VoiceBackendError
from annie_voice.voice.tts import SpeechSynth
from annie_voice.voice.vad import check_vad, silero_vad
from her_os_shared import bundled
from her_os_shared.bundled import BundledFile, ModelIntegrityError, sha256_of, verified_path

RECORDS: list[BundledFile] = [
    HIBARI_HEART,
    *HIBARI_ASSETS.values(),
    *annie_bundled.MOONSHINE_BASE_EN.values(),
    PIPECAT_SILERO_VAD,
]


def tampered(spec: BundledFile, tmp_path: Path) -> Path:
    """A copy of the installed file with one byte changed."""
    data = bytearray(verified_path(spec).read_bytes())
    data[len(data) // 2] ^= 0xFF
    copy = tmp_path / Path(spec.relpath).name
    copy.write_bytes(bytes(data))
    return copy


def substitute(monkeypatch: pytest.MonkeyPatch, spec: BundledFile, path: Path) -> None:
    """Make the bundled-file lookup find `path` for `spec` (every other file as installed)."""
    real = bundled.bundled_path
    monkeypatch.setattr(bundled, "bundled_path", lambda s: path if s == spec else real(s))


@pytest.mark.parametrize("spec", RECORDS, ids=lambda s: s.relpath)
def test_every_record_matches_the_installed_file(spec: BundledFile) -> None:
    path = verified_path(spec)
    assert path.is_file() and sha256_of(path) == spec.sha256


def test_pipecat_loads_the_vad_file_that_was_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    loaded: list[str] = []
    real = pipecat_silero.SileroOnnxModel

    def recording(path: Any, **kwargs: Any) -> Any:
        loaded.append(str(path))
        return real(path, **kwargs)

    monkeypatch.setattr(pipecat_silero, "SileroOnnxModel", recording)
    analyzer = silero_vad(16000, 0.2)
    assert loaded == [str(check_vad())]
    assert sha256_of(Path(loaded[0])) == PIPECAT_SILERO_VAD.sha256
    assert analyzer.params.stop_secs == 0.2


def test_a_tampered_vad_file_is_refused_before_the_analyzer_is_built(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    copy = tampered(PIPECAT_SILERO_VAD, tmp_path)
    substitute(monkeypatch, PIPECAT_SILERO_VAD, copy)
    built: list[Any] = []
    monkeypatch.setattr(pipecat_silero, "SileroOnnxModel", lambda *a, **k: built.append(a))
    with pytest.raises(VoiceBackendError) as info:
        silero_vad(16000, 0.2)
    message = str(info.value)
    assert message.startswith("Silero VAD: ") and str(copy) in message
    assert PIPECAT_SILERO_VAD.sha256 in message and sha256_of(copy) in message
    assert built == []


async def test_start_answers_503_when_the_vad_file_is_not_the_pinned_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    substitute(monkeypatch, PIPECAT_SILERO_VAD, tampered(PIPECAT_SILERO_VAD, tmp_path))
    app = create_app(
        Settings(internal_token=TOKEN, events_enabled=False),
        engine_transport=EngineDouble().transport(),
    )
    async with (
        LifespanManager(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c,
    ):
        r = await c.post("/start", headers={"X-Internal-Token": TOKEN})
    assert r.status_code == 503
    assert "Silero VAD" in r.json()["detail"] and "silero_vad.onnx" in r.json()["detail"]


@pytest.mark.parametrize("name", ["voices.json", "oov.onnx"])
def test_a_tampered_hibari_file_stops_the_voice_before_hibari_reads_it(
    name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    spec = HIBARI_ASSETS[name]
    substitute(monkeypatch, spec, tampered(spec, tmp_path))
    synth = SpeechSynth(Settings(internal_token=TOKEN, models_dir=tmp_path))
    with pytest.raises(ModelIntegrityError, match=rf"{name} is corrupt or not the pinned"):
        synth.load()


# What a fresh process reads from installed packages while the voice's TTS and VAD load and
# speak: Python-level opens (an audit hook) and every onnxruntime session's model file.
AUDIT = """
import json, os, sys
opened = set()
sys.addaudithook(lambda event, args: opened.add(os.fspath(args[0]))
                 if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)) else None)
import onnxruntime
real = onnxruntime.InferenceSession.__init__
def init(self, path_or_bytes, *args, **kwargs):
    if isinstance(path_or_bytes, (str, os.PathLike)):
        opened.add(os.fspath(path_or_bytes))
    real(self, path_or_bytes, *args, **kwargs)
onnxruntime.InferenceSession.__init__ = init

from annie_voice.config import Settings
from annie_voice.voice.tts import SpeechSynth
from annie_voice.voice.vad import silero_vad
synth = SpeechSynth(Settings(internal_token="t" * 32, models_dir=sys.argv[1]))
assert synth.sentences("Hello Zorblax, the quixotic wug is here.")  # an unknown word: OOV net
silero_vad(16000, 0.2)
print(json.dumps(sorted(p if isinstance(p, str) else p.decode() for p in opened)))
"""


def test_the_voice_reads_no_model_data_that_is_not_pinned(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", AUDIT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    site = verified_path(HIBARI_HEART).resolve().parents[2]  # the installed packages
    read = {Path(p).resolve() for p in json.loads(done.stdout.splitlines()[-1])}
    data = {
        p
        for p in read
        if site in p.parents
        and p.suffix not in {".py", ".pyc", ".so", ".pth", ".typed"}
        and not any(part.endswith((".dist-info", "__pycache__")) for part in p.parts)
    }
    pinned = {verified_path(spec).resolve() for spec in RECORDS}
    assert verified_path(HIBARI_ASSETS["oov.onnx"]).resolve() in data  # the audit saw hibari
    assert verified_path(PIPECAT_SILERO_VAD).resolve() in data  # ... and the VAD
    assert data <= pinned, f"read but not pinned: {sorted(map(str, data - pinned))}"
