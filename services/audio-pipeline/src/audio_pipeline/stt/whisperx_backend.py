"""Production speech to text: WhisperX (batched faster-whisper large-v3 + wav2vec2 word
alignment) on the GPU. whisperx and torch are imported only when this backend is chosen, so
the embedded install neither needs nor ships them.
"""

from __future__ import annotations

import importlib
import threading
import time
from pathlib import Path
from typing import Any

from audio_pipeline.audio import SAMPLE_RATE, AudioClip
from audio_pipeline.backends import BackendUnavailableError, module_available
from audio_pipeline.stt import Region, SttSegment, Word, normalize_regions
from her_os_shared.logging import get_logger

log = get_logger(__name__)

_NEEDS = (
    "AUDIO_PIPELINE_STT_BACKEND=whisperx needs the whisperx package and a GPU; "
    "install whisperx (with a CUDA build of torch) or set "
    "AUDIO_PIPELINE_STT_BACKEND=faster-whisper to use the bundled model"
)


class WhisperXStt:
    name = "whisperx"

    def __init__(
        self,
        *,
        model: str = "large-v3",
        device: str = "cuda",
        compute_type: str = "float16",
        language: str | None = "en",
        models_dir: Path = Path("data/models"),
        batch_size: int = 16,
    ) -> None:
        self._model_name = model
        self._device = device
        self._compute_type = compute_type
        self._language = language
        # WhisperX fetches its weights on first load; keep them beside the bundled models.
        self._download_root = models_dir / "whisperx"
        self._batch_size = batch_size
        self._wx: Any = None
        self._model: Any = None
        self._aligners: dict[str, tuple[Any, Any]] = {}
        self._lock = threading.Lock()

    def _import(self) -> Any:
        if not module_available("whisperx"):
            raise BackendUnavailableError(f"{_NEEDS} (whisperx is not installed)")
        try:
            wx = importlib.import_module("whisperx")
        except ImportError as exc:
            raise BackendUnavailableError(f"{_NEEDS} (importing whisperx failed: {exc})") from exc
        if self._device.startswith("cuda"):
            import torch

            if not torch.cuda.is_available():
                raise BackendUnavailableError(
                    f"{_NEEDS} (AUDIO_PIPELINE_STT_DEVICE={self._device} but no CUDA GPU is "
                    "visible)"
                )
        return wx

    def load(self) -> None:
        with self._lock:
            self._load_locked()

    def _load_locked(self) -> Any:
        if self._model is not None:
            return self._model
        t0 = time.perf_counter()
        wx = self._import()
        self._model = wx.load_model(
            self._model_name,
            self._device,
            compute_type=self._compute_type,
            language=self._language,
            download_root=str(self._download_root),
        )
        self._wx = wx
        log.info(
            "stt_loaded",
            backend=self.name,
            model=self._model_name,
            device=self._device,
            compute_type=self._compute_type,
            seconds=round(time.perf_counter() - t0, 2),
        )
        return self._model

    def _aligner(self, language: str) -> tuple[Any, Any]:
        if language not in self._aligners:
            self._aligners[language] = self._wx.load_align_model(
                language_code=language,
                device=self._device,
                model_dir=str(self._download_root),
            )
        return self._aligners[language]

    def transcribe(self, clip: AudioClip, regions: list[Region] | None = None) -> list[SttSegment]:
        duration = clip.duration_s
        # WhisperX runs its own VAD over whatever it is given; with our regions, give it only
        # those spans (each shifted back into clip time) so both stages agree on the speech.
        spans = [(0.0, duration)] if regions is None else normalize_regions(regions, duration)
        out: list[SttSegment] = []
        with self._lock:
            model = self._load_locked()
            for start, end in spans:
                part = clip.slice(start, end)
                if part.samples.size < SAMPLE_RATE // 10:  # under 0.1 s: nothing to decode
                    continue
                out.extend(self._transcribe_part(model, part.samples, start, duration))
        return out

    def _transcribe_part(
        self, model: Any, audio: Any, offset: float, duration: float
    ) -> list[SttSegment]:
        result = model.transcribe(audio, batch_size=self._batch_size, language=self._language)
        language = result.get("language") or self._language
        segments = result.get("segments") or []
        if not segments:
            return []
        align_model, metadata = self._aligner(language)
        aligned = self._wx.align(
            segments, align_model, metadata, audio, self._device, return_char_alignments=False
        )
        out = []
        for seg in aligned.get("segments", []):
            start = _t(seg.get("start"), 0.0) + offset
            end = _t(seg.get("end"), 0.0) + offset
            words = []
            for w in seg.get("words", []):
                text = str(w.get("word", "")).strip()
                if not text:
                    continue
                # The aligner leaves numerals/symbols without times: borrow the segment's.
                ws = _t(w.get("start"), start - offset) + offset
                we = _t(w.get("end"), end - offset) + offset
                words.append(
                    Word(
                        text=text,
                        start=min(max(0.0, ws), duration),
                        end=min(max(ws, we), duration),
                        probability=_t(w.get("score"), 0.0),
                    )
                )
            text = str(seg.get("text", "")).strip()
            if text:
                out.append(
                    SttSegment(
                        text=text,
                        start=min(max(0.0, start), duration),
                        end=min(max(start, end), duration),
                        words=tuple(words),
                        language=language,
                    )
                )
        return out


def _t(value: Any, default: float) -> float:
    return default if value is None else float(value)
