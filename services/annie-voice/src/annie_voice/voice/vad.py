"""Voice activity: Pipecat's Silero VAD, its model file sha256-checked first.

`SileroVADAnalyzer` loads `silero_vad.onnx` from the pipecat-ai wheel by itself, with no check.
Every analyzer is built here, after that very file has been checked against the hash recorded
in bundled.py; a file that differs (a corrupted install, another Pipecat version) stops the
voice with a VoiceBackendError naming the file and both hashes, so `/start` answers 503
instead of a session running on an unknown model.
"""

from __future__ import annotations

from pathlib import Path

from pipecat.audio.vad.silero import SileroVADAnalyzer
from pipecat.audio.vad.vad_analyzer import VADParams

from annie_voice.voice.bundled import PIPECAT_SILERO_VAD
from annie_voice.voice.errors import VoiceBackendError
from her_os_shared.bundled import ModelIntegrityError, verified_path


def check_vad() -> Path:
    """The verified Silero VAD file (VoiceBackendError when it is missing or differs)."""
    try:
        return verified_path(PIPECAT_SILERO_VAD)
    except ModelIntegrityError as exc:
        raise VoiceBackendError(f"Silero VAD: {exc}") from exc


def silero_vad(sample_rate: int, stop_s: float) -> SileroVADAnalyzer:
    """A session's VAD (it keeps state per stream), built once its model file is verified."""
    check_vad()
    return SileroVADAnalyzer(sample_rate=sample_rate, params=VADParams(stop_secs=stop_s))
