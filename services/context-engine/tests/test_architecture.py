"""The context engine's architecture map holds: the import contracts in its pyproject.toml
(import-linter: layers, no loops) pass on the tree, can fail, and say what docs/architecture.md's
map says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

SERVICE = Path(__file__).resolve().parents[1]
REPO = SERVICE.parents[1]
PYPROJECT = SERVICE / "pyproject.toml"
PACKAGE = SERVICE / "src" / "context_engine"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _contracts() -> dict[str, dict]:
    config = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]
    return {c["id"]: c for c in config["contracts"]}


def _layers() -> list[set[str]]:
    return [{p.strip() for p in layer.split("|")} for layer in _contracts()["layers"]["layers"]]


def _lint(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", str(config)],
        cwd=config.parent,
        env={**os.environ, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_import_contracts_hold() -> None:
    result = _lint(PYPROJECT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 kept, 0 broken" in result.stdout


def test_a_layer_importing_upwards_breaks_the_contract(tmp_path: Path) -> None:
    # The same contract with two layers swapped (store above observe, which imports it):
    # the check must fail and name the import, or its passing above proves nothing.
    text = PYPROJECT.read_text()
    swapped = text.replace('    "observe",\n    "store",\n', '    "store",\n    "observe",\n')
    assert swapped != text
    config = tmp_path / "pyproject.toml"
    config.write_text(swapped)
    result = _lint(config)
    assert result.returncode != 0
    assert "context_engine.observe is not allowed to import context_engine.store" in result.stdout


def test_every_package_is_on_the_map() -> None:
    # `exhaustive` makes import-linter fail on a package missing from the layers; this says
    # the same the other way: no layer names a package that is not there.
    children = {
        p.stem if p.is_file() else p.name
        for p in PACKAGE.iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()
    }
    mapped = set().union(*_layers())
    assert mapped == children


def test_the_docs_map_is_the_contract() -> None:
    # docs/architecture.md's map: one row per layer, top first, its packages in backticks in
    # the first column.
    doc = (REPO / "docs" / "architecture.md").read_text()
    section = doc.split("### The context engine's map", 1)[1].split("\n#", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")][1:]
    assert rows, "the map has no rows"
    documented = [set(re.findall(r"`([a-z_]+)/?`", row.split("|")[1])) for row in rows]
    assert documented == _layers()


@pytest.mark.parametrize("contract", ["layers", "no-loops", "routes-take-parts"])
def test_the_contracts_cover_the_whole_package(contract: str) -> None:
    c = _contracts()[contract]
    if contract == "layers":
        assert c["containers"] == ["context_engine"] and c["exhaustive"] is True
    elif contract == "no-loops":
        assert c["ancestors"] == ["context_engine"]
    else:  # only the dependencies module may reach the runtime
        assert c["forbidden_modules"] == ["context_engine.runtime"]
        assert c["ignore_imports"] == ["context_engine.routes.deps -> context_engine.runtime"]


def test_a_route_reaching_for_the_runtime_breaks_the_contract(tmp_path: Path) -> None:
    # Without the one allowed import, every route reaches the runtime through deps.py: the
    # contract must then fail, or its passing proves nothing.
    text = PYPROJECT.read_text()
    loose = text.replace(
        'ignore_imports = ["context_engine.routes.deps -> context_engine.runtime"]\n', ""
    )
    assert loose != text
    config = tmp_path / "pyproject.toml"
    config.write_text(loose)
    result = _lint(config)
    assert result.returncode != 0
    assert "context_engine.routes.deps -> context_engine.runtime" in result.stdout
