"""Read a PyTorch checkpoint (`torch.save` zip format) into numpy arrays, without torch.

A `.pt` file written by torch >= 1.6 is a zip archive: `<root>/data.pkl` is a pickle of the
saved object (here a state dict) in which every tensor is a call to
`torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...)` and every storage a
persistent id `('storage', torch.FloatStorage, key, location, numel)` whose bytes are the file
`<root>/data/<key>` (little-endian unless `<root>/byteorder` says otherwise).

The unpickler below resolves only that small vocabulary — the rebuild functions, the storage
types, `collections.OrderedDict` — and refuses every other global, so (like torch's
`weights_only=True`) loading a file cannot run arbitrary code. Tensors come back as C-ordered
numpy copies with the tensor's shape and dtype.
"""

from __future__ import annotations

import collections
import io
import pickle
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

# torch storage type name → numpy dtype (little-endian; byte-swapped below if the file says so).
_STORAGE_DTYPES: dict[str, str] = {
    "DoubleStorage": "<f8",
    "FloatStorage": "<f4",
    "HalfStorage": "<f2",
    "LongStorage": "<i8",
    "IntStorage": "<i4",
    "ShortStorage": "<i2",
    "CharStorage": "i1",
    "ByteStorage": "u1",
    "BoolStorage": "?",
}


class TorchZipError(ValueError):
    """The file is not a readable PyTorch zip checkpoint, or holds something unsupported."""


class _StorageType:
    def __init__(self, name: str) -> None:
        self.name = name
        self.dtype = np.dtype(_STORAGE_DTYPES[name])


def _rebuild_tensor_v2(
    storage: np.ndarray,
    storage_offset: int,
    size: tuple[int, ...],
    stride: tuple[int, ...],
    requires_grad: bool = False,
    backward_hooks: object = None,
    metadata: object = None,
) -> np.ndarray:
    del requires_grad, backward_hooks, metadata
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    if any(s < 0 for s in size) or any(s < 0 for s in stride):
        raise TorchZipError(f"negative tensor size or stride: {size} / {stride}")
    # Highest element index the view touches must lie inside the storage.
    last = storage_offset + sum((n - 1) * st for n, st in zip(size, stride, strict=True) if n > 0)
    if any(n == 0 for n in size):
        return np.zeros(size, dtype=storage.dtype)
    if storage_offset < 0 or last >= storage.size:
        raise TorchZipError(
            f"tensor of size {size} at offset {storage_offset} overruns its storage "
            f"of {storage.size} elements"
        )
    if not size:  # a 0-d tensor (a scalar, e.g. a batch norm's num_batches_tracked)
        return np.array(storage[storage_offset])
    item = storage.itemsize
    view = np.lib.stride_tricks.as_strided(
        storage[storage_offset:], shape=size, strides=tuple(st * item for st in stride)
    )
    return np.ascontiguousarray(view)


def _rebuild_parameter(
    data: np.ndarray, requires_grad: bool = False, backward_hooks: object = None
) -> np.ndarray:
    del requires_grad, backward_hooks
    return data


_GLOBALS: dict[tuple[str, str], Callable[..., Any] | type] = {
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("collections", "OrderedDict"): collections.OrderedDict,
}


class Inert:
    """Stands in for a class a checkpoint names beside its tensors (a training framework's
    metadata: pyannote's task specifications, torch's version string). It keeps whatever it
    was built or restored with and runs nothing, so such a checkpoint loads as safely as a
    bare state dict."""

    def __init__(self, qualname: str, *args: Any, **kwargs: Any) -> None:
        self.qualname, self.args, self.kwargs = qualname, args, kwargs
        self.state: Any = None

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def __repr__(self) -> str:
        return f"Inert({self.qualname}, args={self.args!r})"


def _inert_class(qualname: str) -> Callable[..., Inert]:
    class _Stub(Inert):
        # pickle builds with cls(*args) (REDUCE) or cls.__new__(cls, *args) (NEWOBJ, no
        # __init__): __new__ records the arguments either way.
        def __new__(cls, *args: Any, **kwargs: Any) -> _Stub:
            self = object.__new__(cls)
            Inert.__init__(self, qualname, *args, **kwargs)
            return self

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

    _Stub.__name__ = _Stub.__qualname__ = f"Inert[{qualname}]"
    return _Stub


class _Unpickler(pickle.Unpickler):
    def __init__(
        self,
        data: bytes,
        read_storage: Callable[[str, np.dtype], np.ndarray],
        inert: frozenset[str] = frozenset(),
    ) -> None:
        super().__init__(io.BytesIO(data))
        self._read_storage = read_storage
        self._inert = inert

    def find_class(self, module: str, name: str) -> Any:
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(name)
        found = _GLOBALS.get((module, name))
        if found is not None:
            return found
        if f"{module}.{name}" in self._inert:
            return _inert_class(f"{module}.{name}")
        raise TorchZipError(f"refusing to load {module}.{name} from a checkpoint")

    def persistent_load(self, pid: Any) -> Any:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise TorchZipError(f"unsupported persistent id {pid!r}")
        _, storage_type, key, _location, numel = pid
        if not isinstance(storage_type, _StorageType):
            raise TorchZipError(f"unsupported storage type {storage_type!r}")
        array = self._read_storage(str(key), storage_type.dtype)
        if array.size < int(numel):
            raise TorchZipError(f"storage {key} holds {array.size} elements, expected {numel}")
        return array


def load_state_dict(
    path: Path | str, *, key: str | None = None, inert: frozenset[str] = frozenset()
) -> dict[str, np.ndarray]:
    """The tensors of a `torch.save`d state dict, as {name: numpy array}.

    `key`: the state dict is that entry of the saved dict (a training checkpoint, whose other
    entries are metadata); `inert`: the classes ("module.Name") that metadata may name, loaded
    as `Inert` stand-ins (never imported or run). Raises TorchZipError for a file that is not
    such a checkpoint (or is damaged).
    """
    obj = _load(path, inert)
    if key is not None:
        if not isinstance(obj, dict) or key not in obj:
            raise TorchZipError(f"{path} has no {key!r} entry")
        obj = obj[key]
    if not isinstance(obj, dict) or not all(
        isinstance(k, str) and isinstance(v, np.ndarray) for k, v in obj.items()
    ):
        raise TorchZipError(f"{path} does not hold a state dict of tensors")
    return dict(obj)


def load_checkpoint(path: Path | str, *, inert: frozenset[str] = frozenset()) -> Any:
    """The whole saved object (tensors as numpy arrays, `inert` classes as stand-ins)."""
    return _load(path, inert)


def _load(path: Path | str, inert: frozenset[str]) -> Any:
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise TorchZipError(f"{path} is not a PyTorch zip checkpoint: {exc}") from exc
    with archive:
        pickles = [n for n in archive.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
        if len(pickles) != 1:
            raise TorchZipError(f"{path} has {len(pickles)} data.pkl entries, expected 1")
        root = pickles[0][: -len("data.pkl")]
        names = set(archive.namelist())
        swap = False
        if f"{root}byteorder" in names:
            order = archive.read(f"{root}byteorder").decode("ascii").strip()
            if order not in ("little", "big"):
                raise TorchZipError(f"unknown byteorder {order!r} in {path}")
            swap = order == "big"
        cache: dict[str, np.ndarray] = {}

        def read_storage(key: str, dtype: np.dtype) -> np.ndarray:
            if key not in cache:
                entry = f"{root}data/{key}"
                if entry not in names:
                    raise TorchZipError(f"{path} lacks the storage {entry}")
                raw = archive.read(entry)
                dt = dtype.newbyteorder(">") if swap else dtype
                if len(raw) % dt.itemsize:
                    raise TorchZipError(f"storage {key} is not a whole number of {dt} values")
                cache[key] = np.frombuffer(raw, dtype=dt).astype(dtype)
            return cache[key]

        try:
            return _Unpickler(archive.read(pickles[0]), read_storage, inert).load()
        except TorchZipError:
            raise
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError) as exc:
            raise TorchZipError(f"{path}: cannot unpickle data.pkl ({exc})") from exc
