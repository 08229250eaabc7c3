"""Shared by the pluggable backends (stt/, vad/, speakers/, emotion/): the error a
misconfigured one raises, and the pyannote loading both pyannote backends use."""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType
from typing import Any


class BackendUnavailableError(RuntimeError):
    """The configured backend cannot run here (package, weights, token or GPU missing).

    The message names the setting that chose it and what to do instead.
    """


def module_available(name: str) -> bool:
    """Whether `name` (dotted allowed) can be imported, without importing it."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a missing parent package raises instead of None
        return False


def import_pyannote(needs: str, token: str | None) -> tuple[ModuleType, ModuleType]:
    """(pyannote.audio, torch), after checking package and token; `needs` says which setting
    chose pyannote and what to do instead."""
    if not module_available("pyannote.audio"):
        raise BackendUnavailableError(f"{needs} (pyannote.audio is not installed)")
    if not token:
        raise BackendUnavailableError(f"{needs} (AUDIO_PIPELINE_PYANNOTE_TOKEN is not set)")
    try:
        return importlib.import_module("pyannote.audio"), importlib.import_module("torch")
    except ImportError as exc:
        raise BackendUnavailableError(f"{needs} (import failed: {exc})") from exc


def pyannote_pretrained(loader: Any, name: str, token: str, needs: str) -> Any:
    """`loader.from_pretrained(name)` with the token, in pyannote 4.x or 3.x spelling."""
    try:
        loaded = loader.from_pretrained(name, token=token)
    except TypeError:  # pyannote.audio 3.x spells it use_auth_token
        loaded = loader.from_pretrained(name, use_auth_token=token)
    if loaded is None:
        raise BackendUnavailableError(f"{needs} (could not load {name}: check the token's access)")
    return loaded
