"""Text to speech: a Pipecat TTS service around a sentence synthesiser.

The synthesiser is chosen by ANNIE_VOICE_TTS_BACKEND and loaded once per process, on first use:

- `hibari` (embedded): hibari-tts's bundled voice (ONNX) and the pronunciation data hibari
  reads for it, all sha256-checked before hibari is imported; on CPU.
- `kokoro` (production): kokoro-onnx with local model and voices files
  (ANNIE_VOICE_KOKORO_MODEL_PATH, ANNIE_VOICE_KOKORO_VOICES_PATH); when the package is not
  installed it fails with a message naming the setting.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any

import numpy as np
from pipecat.frames.frames import ErrorFrame, Frame, StartFrame, TTSAudioRawFrame
from pipecat.services.settings import TTSSettings
from pipecat.services.tts_service import TTSService

from annie_voice.config import Settings
from annie_voice.voice.bundled import HIBARI_ASSETS, HIBARI_HEART
from annie_voice.voice.errors import VoiceBackendError
from her_os_shared.bundled import verified_path
from her_os_shared.logging import get_logger

log = get_logger(__name__)

TTS_SAMPLE_RATE = 24000  # hibari and Kokoro both speak at 24 kHz

Synthesise = Callable[[str], list[np.ndarray]]

# Short sentences said again and again (the offline responder opens every answer with one of
# two) are kept once synthesised: the first words of a reply then cost no synthesis at all.
CACHE_MAX_CHARS = 80
CACHE_ENTRIES = 32


class SpeechSynth:
    """Loads the configured synthesiser once (thread-safe); `sentences(text)` → float32 24 kHz
    arrays, one per sentence."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.backend = settings.tts_backend
        self._fn: Synthesise | None = None
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, tuple[np.ndarray, ...]] = OrderedDict()

    @property
    def voice(self) -> str:
        return (
            self.settings.hibari_voice if self.backend == "hibari" else self.settings.kokoro_voice
        )

    def check(self) -> None:
        """Raise VoiceBackendError when the configured backend cannot run here (no load)."""
        if self.backend == "kokoro":
            setting = Settings.env_name("tts_backend")
            try:
                import kokoro_onnx  # noqa: F401
            except ImportError:
                raise VoiceBackendError(
                    f"{setting}=kokoro needs the kokoro-onnx package, which is not installed "
                    f"(install it on the GPU host, or use {setting}=hibari)"
                ) from None
            for field in ("kokoro_model_path", "kokoro_voices_path"):
                path = getattr(self.settings, field)
                if path is None or not path.is_file():
                    raise VoiceBackendError(f"{Settings.env_name(field)}={path} is not a file")
        elif self.settings.hibari_voice != "heart":
            raise VoiceBackendError(
                f"{Settings.env_name('hibari_voice')}={self.settings.hibari_voice!r}: only the "
                "bundled voice 'heart' is available offline"
            )

    def _load_locked(self) -> Synthesise:
        if self._fn is not None:
            return self._fn
        self.check()
        speed = self.settings.tts_speed
        if self.backend == "kokoro":
            from kokoro_onnx import Kokoro

            kokoro = Kokoro(
                str(self.settings.kokoro_model_path), str(self.settings.kokoro_voices_path)
            )
            voice = self.settings.kokoro_voice

            def kokoro_fn(text: str) -> list[np.ndarray]:
                samples, rate = kokoro.create(text, voice=voice, speed=speed, lang="en-us")
                if rate != TTS_SAMPLE_RATE:
                    import soxr

                    samples = soxr.resample(samples, rate, TTS_SAMPLE_RATE)
                return [np.asarray(samples, dtype=np.float32)]

            self._fn = kokoro_fn
        else:
            model = verified_path(HIBARI_HEART)
            # hibari reads the rest from its package, some of it when imported: checked first.
            for spec in HIBARI_ASSETS.values():
                verified_path(spec)
            from hibari import Hibari

            engine = Hibari(voice="heart", model=str(model), threads=1)

            def hibari_fn(text: str) -> list[np.ndarray]:
                return [np.asarray(a, dtype=np.float32) for a in engine.stream(text, speed=speed)]

            self._fn = hibari_fn
        log.info("voice.tts_loaded", backend=self.backend)
        return self._fn

    def load(self) -> None:
        with self._lock:
            self._load_locked()

    def sentences(self, text: str) -> list[np.ndarray]:
        """`text` spoken: float32 24 kHz arrays, one per sentence (short texts from the cache;
        the arrays are shared, so callers must not write to them)."""
        with self._lock:
            cached = self._cache.get(text)
            if cached is not None:
                self._cache.move_to_end(text)
                return list(cached)
            parts = self._load_locked()(text)
            if len(text) <= CACHE_MAX_CHARS:
                for part in parts:
                    part.flags.writeable = False
                self._cache[text] = tuple(parts)
                while len(self._cache) > CACHE_ENTRIES:
                    self._cache.popitem(last=False)
            return parts

    def cached(self) -> list[str]:
        """The texts whose speech is cached, least recently used first."""
        with self._lock:
            return list(self._cache)

    def warm(self, texts: Sequence[str]) -> None:
        """Synthesise `texts` now (loading the model), so their first use costs nothing."""
        for text in texts:
            self.sentences(text)


# hibari starts every sentence with ~0.3 s of silence: at the start of a reply that is pure
# latency (and between sentences its ~0.4 s trailing silence is pause enough). 10 ms are
# kept: the samples just before the sound begins, so it starts without a click.
LEAD_KEEP_S = 0.01
SILENCE_LEVEL = 1e-3


def trim_leading_silence(samples: np.ndarray, keep_s: float = LEAD_KEEP_S) -> np.ndarray:
    loud = np.flatnonzero(np.abs(samples) > SILENCE_LEVEL)
    if loud.size == 0:
        return samples[:0]
    return samples[max(0, int(loud[0]) - int(keep_s * TTS_SAMPLE_RATE)) :]


def to_pcm16(samples: np.ndarray) -> bytes:
    return (np.clip(samples, -1.0, 1.0) * 32767).astype("<i2").tobytes()


class SynthTTSService(TTSService):
    """Speaks each sentence Pipecat's text aggregation hands it."""

    def __init__(self, synth: SpeechSynth, **kwargs: Any) -> None:
        super().__init__(
            sample_rate=TTS_SAMPLE_RATE,
            push_start_frame=True,
            push_stop_frames=True,
            settings=TTSSettings(model=synth.backend, voice=synth.voice, language="en"),
            **kwargs,
        )
        self.synth = synth

    def can_generate_metrics(self) -> bool:
        return True

    async def start(self, frame: StartFrame) -> None:
        await super().start(frame)
        await asyncio.to_thread(self.synth.load)

    async def run_tts(self, text: str, context_id: str) -> AsyncGenerator[Frame | None, None]:
        try:
            await self.start_tts_usage_metrics(text)
            parts = await asyncio.to_thread(self.synth.sentences, text)
        except Exception as exc:
            log.warning("voice.tts_failed", error=str(exc)[:300])
            yield ErrorFrame(error=f"text to speech failed: {exc}")
            return
        finally:
            await self.stop_ttfb_metrics()
        for part in map(trim_leading_silence, parts):
            if part.size:
                yield TTSAudioRawFrame(
                    audio=to_pcm16(part),
                    sample_rate=TTS_SAMPLE_RATE,
                    num_channels=1,
                    context_id=context_id,
                )
