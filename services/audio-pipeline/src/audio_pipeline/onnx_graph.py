"""Networks rebuilt as ONNX graphs from their PyTorch weights (no torch at service time): the
plumbing every builder shares, and the CPU session every ONNX model of the pipeline runs in.
A builder adds nodes with `op`, weights with `get` (which records that the weight was used)
and constants with `const`; `finish` checks that every weight of the state dict went into
the graph (a forgotten layer fails the load instead of giving wrong answers) and returns the
model."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from audio_pipeline.bundled import BundledFile, verified_path
from her_os_shared.bundled import LazyModel
from her_os_shared.logging import get_logger

if TYPE_CHECKING:
    import onnx
    import onnxruntime

OPSET = 17

log = get_logger(__name__)


class GraphBuilder:
    def __init__(self, weights: Mapping[str, np.ndarray]) -> None:
        from onnx import helper

        self.w = weights
        self.helper = helper
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._n = 0
        self.used: set[str] = set()

    def name(self, hint: str) -> str:
        self._n += 1
        return f"{hint}_{self._n}"

    def const(self, value: np.ndarray, hint: str = "c") -> str:
        from onnx import numpy_helper

        n = self.name(hint)
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(value), n))
        return n

    def int64s(self, *values: int) -> str:
        return self.const(np.array(values, dtype=np.int64), "i64")

    def op(self, op_type: str, inputs: list[str], hint: str | None = None, **attrs: object) -> str:
        out = self.name(hint or op_type.lower())
        self.nodes.append(self.helper.make_node(op_type, inputs, [out], **attrs))
        return out

    def get(self, key: str) -> np.ndarray:
        self.used.add(key)
        return self.w[key].astype(np.float32)

    def finish(
        self,
        graph_name: str,
        output: str,
        inputs: Sequence[tuple[str, Sequence[str | int]]],
        outputs: Sequence[tuple[str, Sequence[str | int]]],
    ) -> onnx.ModelProto:
        """The checked model: `output` (a node's result) becomes the graph output named by
        `outputs[0]`; every weight must have been used."""
        import onnx
        from onnx import TensorProto

        unused = set(self.w) - self.used
        if unused:
            raise ValueError(f"{graph_name} weights not used by the graph: {sorted(unused)[:5]}")
        self.nodes.append(self.helper.make_node("Identity", [output], [outputs[0][0]]))
        graph = self.helper.make_graph(
            self.nodes,
            graph_name,
            [self.helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in inputs],
            [self.helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in outputs],
            self.inits,
        )
        model = self.helper.make_model(
            graph, opset_imports=[self.helper.make_opsetid("", OPSET)], producer_name="her-os"
        )
        model.ir_version = 8
        onnx.checker.check_model(model)
        return model


def cpu_session(model: onnx.ModelProto | Path, threads: int) -> onnxruntime.InferenceSession:
    """An onnxruntime CPU session with `threads` intra-op threads: of an in-memory model
    (nothing written to disk) or of a model file."""
    import onnxruntime

    opts = onnxruntime.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    source = str(model) if isinstance(model, Path) else model.SerializeToString()
    return onnxruntime.InferenceSession(source, opts, providers=["CPUExecutionProvider"])


class LazyCpuSession(LazyModel["onnxruntime.InferenceSession"]):
    """The CPU session of a bundled model, made on first use and once (her_os_shared's
    LazyModel: under a lock, or warmed): the file is hash-checked (`verified_path`), then
    `build` turns it into what `cpu_session` runs (an in-memory graph rebuilt from its
    weights, or the file itself)."""

    def __init__(
        self,
        model: BundledFile,
        build: Callable[[Path], onnx.ModelProto | Path],
        threads: int | None,
        *,
        event: str,
    ) -> None:
        super().__init__(event, self._open)
        self.model = model
        self._build = build
        # One or two intra-op threads by default: the networks gain little beyond two, and
        # the pipeline runs STT and emotion on the remaining cores.
        self._threads = threads or min(2, os.cpu_count() or 1)
        self._event = event

    def _open(self) -> onnxruntime.InferenceSession:
        path = verified_path(self.model)
        session = cpu_session(self._build(path), self._threads)
        log.info(self._event, path=str(path), threads=self._threads)
        return session
