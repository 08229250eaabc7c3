"""Load a file of scripts/ as a module (scripts/ is not a package), so tests exercise the real
script."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def load_file(path: Path, name: str, *, reuse: bool = False) -> ModuleType:
    """The module at `path`, imported under `name` (afresh, or the one already imported when
    `reuse`)."""
    if reuse and name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before exec: dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def load_script(name: str) -> ModuleType:
    return load_file(SCRIPTS / f"{name}.py", name)


def load_audio_scoring() -> ModuleType:
    """bench/audio/scoring.py, by path under its own name (bench/answers has a scoring.py)."""
    return load_file(SCRIPTS.parent / "bench" / "audio" / "scoring.py", "audio_scoring", reuse=True)
