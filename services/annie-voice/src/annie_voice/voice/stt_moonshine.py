"""Moonshine base (English) speech to text, run by onnxruntime: Annie's embedded default
(ADR 0015).

Whisper's encoder always works on a 30 s window, so a 2–3 s question costs as much as 30 s of
speech (~1.1 s on 2 cores). Moonshine's encoder works on the audio as long as it is: the same
question takes 0.15–0.3 s, with the same word error rate on the real two-speaker call
(docs/benchmarks.md).

The model files are moonshine-cpp's (MIT): an encoder and a merged decoder (one graph with and
without the self-attention cache, switched by `use_cache_branch`) in onnxruntime's ORT format,
and its tokenizer. In that format the int8 weights are turned into float tensors by Cast/Mul
nodes on every call (a decoder step took 55 ms), so on load each file is written out once as
an ONNX graph (onnxruntime does that; onnx names the If-branches it leaves unnamed) and loaded
from it, where onnxruntime's constant folding converts the weights once (a step: ~15 ms).
Everything happens in memory and in a temporary folder; nothing is downloaded.
"""

from __future__ import annotations

import math
import tempfile
import threading
from pathlib import Path
from typing import Any

import numpy as np

from annie_voice.config import Settings, moonshine_platform
from annie_voice.voice.bundled import MOONSHINE_BASE_EN
from annie_voice.voice.errors import VoiceBackendError
from annie_voice.voice.stt import STT_SAMPLE_RATE, SpeechRecognizer
from her_os_shared.bundled import ModelIntegrityError, bundled_path, verified_path
from her_os_shared.logging import get_logger

log = get_logger(__name__)

BOS, EOS = 1, 2  # the decoder's start and end tokens
# Moonshine's own bound on the text of a clip (its reference code: 6 tokens a second), plus a
# few for very short clips ("Hello?"); a decoder that loops stops there.
TOKENS_PER_SECOND = 6
EXTRA_TOKENS = 8
# Longer segments are cut into equal pieces of at most this length (Moonshine was trained on
# clips of up to ~30 s). Shorter than MIN_SECONDS is padded with silence (the encoder's
# convolutions need some length; under ~0.1 s they fail).
MAX_SECONDS = 30.0
MIN_SECONDS = 0.5
_METASPACE = "\u2581".encode()


def read_tokenizer(path: Path) -> list[bytes]:
    """moonshine-cpp's tokenizer.bin: each token's bytes after a one-byte length, in id order
    (ids 3–258 are the raw bytes of the byte fallback)."""
    data = path.read_bytes()
    pieces: list[bytes] = []
    at = 0
    while at < len(data):
        size = data[at]
        if at + 1 + size > len(data):
            raise ModelIntegrityError(f"{path}: truncated token {len(pieces)}")
        pieces.append(data[at + 1 : at + 1 + size])
        at += 1 + size
    return pieces


def detokenize(ids: list[int], pieces: list[bytes]) -> str:
    raw = b"".join(pieces[i] for i in ids if 2 < i < len(pieces))  # no <unk>, <s>, </s>
    return raw.replace(_METASPACE, b" ").decode("utf-8", errors="replace").strip()


def _onnx_from_ort(path: Path, workdir: Path) -> bytes:
    """An ORT-format model as ONNX bytes, so that onnxruntime optimises it on load."""
    import onnx
    import onnxruntime as ort

    out = workdir / (path.stem + ".onnx")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.optimized_model_filepath = str(out)
    options.log_severity_level = 3
    ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    model = onnx.load(str(out))

    def name(graph: Any, label: str) -> None:  # the ONNX checker wants every graph named
        if not graph.name:
            graph.name = label
        for node in graph.node:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    name(attr.g, f"{label}.{node.name}.{attr.name}")

    name(model.graph, path.stem)
    return model.SerializeToString()


def _release_freed_heap() -> None:
    """Give the conversion's freed buffers (~270 MB of model copies) back to the OS: glibc keeps
    freed heap otherwise, and the process would stay at ~750 MB more instead of ~480 MB."""
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to do
        pass


class _Model:
    """The two sessions and the tokenizer, loaded."""

    def __init__(self, threads: int) -> None:
        import onnxruntime as ort

        paths = {key: verified_path(spec) for key, spec in MOONSHINE_BASE_EN.items()}
        self.pieces = read_tokenizer(paths["tokenizer"])
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # Spinning workers would take the cores from TTS and the event loop between steps.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        cpu = ["CPUExecutionProvider"]
        with tempfile.TemporaryDirectory(prefix="her-os-moonshine-") as tmp:
            self.encoder, self.decoder = (
                ort.InferenceSession(_onnx_from_ort(paths[key], Path(tmp)), options, providers=cpu)
                for key in ("encoder", "decoder")
            )
        _release_freed_heap()
        inputs = self.decoder.get_inputs()
        past = [i for i in inputs if i.name.startswith("past_")]
        self.past_names = [i.name for i in past]
        self.outputs = [o.name for o in self.decoder.get_outputs()]
        expected = {"input_ids", "encoder_hidden_states", "use_cache_branch"}
        if not past or not expected <= {i.name for i in inputs} or self.outputs[0] != "logits":
            raise ModelIntegrityError("Moonshine decoder is not a merged decoder with a cache")
        self.heads, self.head_dim = int(past[0].shape[1]), int(past[0].shape[3])

    def generate(self, audio: np.ndarray) -> list[int]:
        """Greedy decoding of one clip: token ids without <s> and </s>."""
        (hidden,) = self.encoder.run(None, {"input_values": audio[None, :]})
        past = {n: np.zeros((1, self.heads, 0, self.head_dim), np.float32) for n in self.past_names}
        limit = math.ceil(len(audio) / STT_SAMPLE_RATE * TOKENS_PER_SECOND) + EXTRA_TOKENS
        ids: list[int] = []
        last = BOS  # the id fed to the next step
        for step in range(limit):
            logits, *present = self.decoder.run(
                None,
                {
                    "input_ids": np.array([[last]], np.int64),
                    "encoder_hidden_states": hidden,
                    "use_cache_branch": np.array([step > 0]),
                    **past,
                },
            )
            last = int(logits[0, -1].argmax())
            if last == EOS:
                break
            ids.append(last)
            for out, value in zip(self.outputs[1:], present, strict=True):
                # The cross-attention cache is computed on the first step only.
                if step == 0 or ".decoder." in out:
                    past[out.replace("present", "past_key_values", 1)] = value
        return ids


class MoonshineRecognizer(SpeechRecognizer):
    """Moonshine base English, loaded once (thread-safe); onnxruntime sessions run concurrent
    calls, so sessions do not wait for each other's transcriptions."""

    backend = "moonshine"

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self._model: _Model | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return "moonshine-base-en (bundled)"

    def check(self) -> None:
        language = self.settings.stt_language
        if language not in (None, "en"):
            raise VoiceBackendError(
                f"{Settings.env_name('stt_backend')}=moonshine understands English only, but "
                f"{Settings.env_name('stt_language')}={language}; use "
                f"{Settings.env_name('stt_backend')}=faster-whisper for other languages"
            )
        if not moonshine_platform():
            raise VoiceBackendError(
                f"{Settings.env_name('stt_backend')}=moonshine needs moonshine-cpp, which ships "
                f"for Linux x86_64 only; use {Settings.env_name('stt_backend')}=faster-whisper"
            )
        try:
            for spec in MOONSHINE_BASE_EN.values():
                bundled_path(spec)
        except ModelIntegrityError as exc:
            raise VoiceBackendError(str(exc)) from exc

    def load(self) -> _Model:
        with self._lock:
            if self._model is None:
                self.check()
                self._model = _Model(self.settings.stt_threads)
                log.info("voice.stt_loaded", backend=self.backend)
            return self._model

    def transcribe(self, samples: np.ndarray) -> tuple[str, str | None]:
        model = self.load()
        audio = np.asarray(samples, dtype=np.float32).reshape(-1)
        if audio.size == 0:
            return "", "en"
        pieces = max(1, math.ceil(audio.size / (MAX_SECONDS * STT_SAMPLE_RATE)))
        texts = []
        for chunk in np.array_split(audio, pieces):
            short = int(MIN_SECONDS * STT_SAMPLE_RATE) - chunk.size
            if short > 0:
                chunk = np.concatenate([chunk, np.zeros(short, np.float32)])
            texts.append(detokenize(model.generate(np.ascontiguousarray(chunk)), model.pieces))
        return " ".join(t for t in texts if t), "en"
