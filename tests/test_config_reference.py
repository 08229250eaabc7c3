"""The configuration reference (docs/deploy.md) and .env.example list every setting the
services read, and match the settings classes (scripts/config_reference.py)."""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path
from types import ModuleType

import pytest
from scripts_harness import load_script

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def ref() -> ModuleType:
    return load_script("config_reference")


def all_env_names(ref: ModuleType, components: tuple) -> dict[str, list[str]]:
    """Every variable, straight from the classes (not through the renderer)."""
    out = {}
    for component in components:
        cls = component.settings_class()
        prefix = cls.model_config["env_prefix"]
        out[component.name] = [f"{prefix}{name}".upper() for name in cls.model_fields]
    return out


def test_reference_and_env_example_are_up_to_date(ref: ModuleType, capsys) -> None:
    code = ref.main(["--check"])
    assert code == 0, "run `make config-reference`:\n" + capsys.readouterr().out[-4000:]


def test_every_setting_is_in_the_reference(ref: ModuleType) -> None:
    doc = (REPO / "docs" / "deploy.md").read_text(encoding="utf-8")
    names = all_env_names(ref, (*ref.SERVICES, ref.CLI))
    assert sum(len(v) for v in names.values()) > 150  # the walk found the real classes
    for component, envs in names.items():
        for env in envs:
            assert re.search(rf"^\| `{env}` \|", doc, re.M), (
                f"{component}: {env} not in the reference"
            )


def test_every_service_setting_is_in_env_example(ref: ModuleType) -> None:
    text = (REPO / ".env.example").read_text(encoding="utf-8")
    for component, envs in all_env_names(ref, ref.SERVICES).items():
        for env in envs:
            assert re.search(rf"^# {env}[=:]", text, re.M), (
                f"{component}: {env} not in .env.example"
            )


def test_compose_set_settings_are_marked_not_settable(ref: ModuleType) -> None:
    text = (REPO / ".env.example").read_text(encoding="utf-8")
    assert "# CONTEXT_ENGINE_GRAPH_BACKEND: set by docker-compose.yml" in text
    assert "# CONTEXT_ENGINE_SESSION_GAP_S=900.0" in text
    # Nothing in the generated part is active: it documents, it does not set.
    section = text[text.index(ref.ENV_BEGIN) : text.index(ref.ENV_END)]
    assert not re.search(r"^[A-Z]", section, re.M)


@pytest.fixture
def copies(ref: ModuleType, tmp_path: Path, monkeypatch) -> tuple[Path, Path]:
    """The generator pointed at copies of docs/deploy.md and .env.example, up to date: a test
    may rewrite them, never the repository's."""
    doc, env = tmp_path / "deploy.md", tmp_path / "env.example"
    doc.write_text((REPO / "docs" / "deploy.md").read_text(encoding="utf-8"), encoding="utf-8")
    env.write_text((REPO / ".env.example").read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setattr(ref, "DEPLOY_DOC", doc)
    monkeypatch.setattr(ref, "ENV_EXAMPLE", env)
    assert ref.main([]) == 0
    return doc, env


def test_a_stale_reference_is_caught(ref: ModuleType, copies: tuple[Path, Path]) -> None:
    doc, env = copies
    fresh = doc.read_text(encoding="utf-8")
    assert ref.main(["--check"]) == 0
    doc.write_text(
        "".join(
            line
            for line in fresh.splitlines(keepends=True)
            if not line.startswith("| `CONTEXT_ENGINE_RRF_K`")
        ),
        encoding="utf-8",
    )
    assert ref.main(["--check"]) == 1
    assert ref.main([]) == 0  # rewrites it
    assert doc.read_text(encoding="utf-8") == fresh
    env.write_text(
        env.read_text(encoding="utf-8").replace("# CONTEXT_ENGINE_RRF_K=10\n", ""),
        encoding="utf-8",
    )
    assert ref.main(["--check"]) == 1


def test_missing_markers_are_an_error(ref: ModuleType, copies: tuple[Path, Path]) -> None:
    doc, _ = copies
    doc.write_text("# no markers\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="markers"):
        ref.main(["--check"])


def test_rendering_of_a_settings_class(ref: ModuleType, tmp_path: Path, monkeypatch) -> None:
    """Comments above a field become its description (shared by a field right below with
    none of its own; a section header is not part of it); defaults are spelt as an
    environment variable would be; a Literal lists its choices."""
    (tmp_path / "fake_settings.py").write_text(
        textwrap.dedent(
            """
            from pathlib import Path
            from typing import Literal
            from pydantic import Field, SecretStr
            from pydantic_settings import BaseSettings, SettingsConfigDict

            class Settings(BaseSettings):
                model_config = SettingsConfigDict(env_prefix="FAKE_")

                # --- storage ---
                # Where things go.
                data_dir: Path = Path("data/x")
                spare_dir: Path | None = None

                # Which engine: a or b.
                engine: Literal["a", "b"] = "a"
                secret: SecretStr | None = None
                weights: dict[str, float] = Field(default_factory=lambda: {"g": 0.5})
                on: bool = True
            """
        ),
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    component = ref.Component("fake", "fake_settings:Settings", None)
    got = {s.field: s for s in ref.settings_of(component)}
    assert list(got) == ["data_dir", "spare_dir", "engine", "secret", "weights", "on"]
    assert got["data_dir"].env == "FAKE_DATA_DIR"
    assert got["data_dir"].description == "Where things go."
    assert got["spare_dir"].description == "Where things go."  # directly below, none of its own
    assert got["spare_dir"].default == ""
    assert got["engine"].type == "`a` \\| `b`"
    assert got["engine"].description == "Which engine: a or b."
    assert got["secret"].type == "secret (optional)"
    assert got["weights"].default == '{"g":0.5}'
    assert got["on"].default == "true"
    assert got["on"].compose is None


# Reads of the process environment outside the settings classes would be settings that the
# reference cannot see. Writes (graphiti's telemetry switch) are fine.
def _environment_reads(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = ast.unparse(node.func)
            if func in ("os.getenv", "getenv", "os.environ.get", "environ.get"):
                found.append(f"{path}:{node.lineno} {func}()")
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            if ast.unparse(node.value) in ("os.environ", "environ"):
                found.append(f"{path}:{node.lineno} os.environ[...]")
    return found


def test_services_read_the_environment_only_through_their_settings() -> None:
    sources = sorted(REPO.glob("services/*/src/**/*.py"))
    assert len(sources) > 50
    reads = [hit for path in sources for hit in _environment_reads(path)]
    assert reads == [], "settings must live in the service's config.py"


def test_the_environment_scan_sees_a_read(tmp_path: Path) -> None:
    sample = tmp_path / "x.py"
    sample.write_text(
        "import os\na = os.getenv('A')\nb = os.environ['B']\nos.environ['C'] = '1'\n",
        encoding="utf-8",
    )
    assert [hit.split(" ", 1)[1] for hit in _environment_reads(sample)] == [
        "os.getenv()",
        "os.environ[...]",
    ]
