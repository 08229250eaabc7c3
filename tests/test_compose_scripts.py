"""deploy/backup.sh, restore.sh and rebuild.sh, run for real against a test double of the
`docker` command (no Docker daemon here): a script on PATH that records every call with what
it was given on stdin, and answers like `docker compose` would (a dump on stdout for a dump,
a listing for `ps`). What this proves: the order of the steps, the files and manifest a
backup writes, that a restore checks them before it touches anything, and that Neo4j is
started again whatever happens. What it cannot: that the real containers accept the
commands (docs/deploy.md says so)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

FAKE_DOCKER = r"""#!/usr/bin/env bash
# Test double of `docker`: records argv (and the size and start of stdin when it reads one).
log="$FAKE_DOCKER_LOG"
args="$*"
args="${args//$'\n'/ }"  # the Qdrant script is passed as an argument: one line per call
args="${args//$'\t'/ }"
stdin=""
if [[ "$args" == *"pg_restore"* || "$args" == *" restore"* || "$args" == *"tar -C /data -xf"* \
      || "$args" == *"--from-stdin"* ]]; then
  stdin=$(head -c 40)
fi
printf '%s\t%s\n' "$args" "$stdin" >>"$log"
case "$args" in
  "compose version") echo "Docker Compose version v2.40.3" ;;
  *"pg_dump"*) printf 'PGDMP-postgres' ;;
  *"--entrypoint tar audio-pipeline"*) printf 'TAR-files' ;;
  *"context-engine"*"backup") printf 'QDRANT-snapshots' ;;
  "compose ps --status running --quiet neo4j") echo "3f2a" ;;
  *"database dump"*)
    [ -n "${FAKE_NEO4J_FAIL:-}" ] && { echo "dump failed" >&2; exit 1; }
    printf 'NEO4J-dump' ;;
esac
exit 0
"""


@pytest.fixture
def docker(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "docker"
    fake.write_text(FAKE_DOCKER, encoding="utf-8")
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPOSE_", "NEO4J_"))}
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    env["FAKE_DOCKER_LOG"] = str(tmp_path / "docker.log")
    return env


def calls(env: dict[str, str]) -> list[tuple[str, str]]:
    log = Path(env["FAKE_DOCKER_LOG"])
    if not log.exists():
        return []
    return [tuple(line.split("\t", 1)) for line in log.read_text().splitlines()]  # type: ignore[misc]


def script(name: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(REPO / "deploy" / name), *args],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip


def test_backup_writes_every_store_and_a_manifest(docker: dict[str, str], tmp_path: Path) -> None:
    done = script("backup.sh", str(tmp_path / "backups"), env=docker)
    assert done.returncode == 0, done.stderr
    (out,) = (tmp_path / "backups").iterdir()
    assert out.name.startswith("her-os-") and out.name.endswith("Z")
    assert oct(out.stat().st_mode & 0o777) == "0o700"  # memories in the clear: owner only
    expected = {
        "postgres.dump": b"PGDMP-postgres",
        "files.tar": b"TAR-files",
        "qdrant.tar": b"QDRANT-snapshots",
        "neo4j.dump": b"NEO4J-dump",
    }
    for name, data in expected.items():
        assert (out / name).read_bytes() == data, name
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["format"] == "her-os compose backup 1"
    assert manifest["neo4j_database"] == "neo4j"
    for name, data in expected.items():
        assert manifest["files"][name] == {
            "sha256": hashlib.sha256(data).hexdigest(),
            "bytes": len(data),
        }
    subprocess.run(["sha256sum", "--quiet", "-c", "SHA256SUMS"], cwd=out, check=True)

    commands = [argv for argv, _ in calls(docker)]
    stop = commands.index("compose stop neo4j")
    dump = next(i for i, c in enumerate(commands) if "database dump neo4j --to-stdout" in c)
    start = commands.index("compose start neo4j")
    assert stop < dump < start  # the dump runs on a stopped Neo4j, which comes back
    assert "--user neo4j" in commands[dump]
    assert any("exec -T postgres sh -c exec pg_dump -Fc" in c for c in commands)


def test_neo4j_is_started_again_when_its_dump_fails(docker: dict[str, str], tmp_path: Path) -> None:
    done = script("backup.sh", str(tmp_path / "b"), env=docker | {"FAKE_NEO4J_FAIL": "1"})
    assert done.returncode != 0
    commands = [argv for argv, _ in calls(docker)]
    assert commands[-1] == "compose start neo4j", commands[-3:]
    (out,) = (tmp_path / "b").iterdir()
    assert not (out / "manifest.json").exists()  # an incomplete backup has no manifest


def test_restore_checks_the_backup_then_puts_every_store_back(
    docker: dict[str, str], tmp_path: Path
) -> None:
    assert script("backup.sh", str(tmp_path / "b"), env=docker).returncode == 0
    (backup,) = (tmp_path / "b").iterdir()
    Path(docker["FAKE_DOCKER_LOG"]).unlink()

    done = script("restore.sh", str(backup), env=docker)
    assert done.returncode == 0, done.stderr
    recorded = calls(docker)
    commands = [argv for argv, _ in recorded]
    fed = {argv: stdin for argv, stdin in recorded}
    assert commands[1] == "compose stop dashboard annie-voice context-engine audio-pipeline"
    pg = next(c for c in commands if "pg_restore --clean --if-exists" in c)
    files = next(c for c in commands if "tar -C /data -xf -" in c)
    qdrant = next(c for c in commands if c.endswith(" restore"))
    neo4j = next(c for c in commands if "database load neo4j --from-stdin" in c)
    assert (fed[pg], fed[files], fed[qdrant], fed[neo4j]) == (
        "PGDMP-postgres", "TAR-files", "QDRANT-snapshots", "NEO4J-dump",
    )  # fmt: skip
    assert commands.index("compose stop neo4j") < commands.index(neo4j)
    assert commands[-1] == "compose up -d"


def test_restore_refuses_a_damaged_backup_before_touching_anything(
    docker: dict[str, str], tmp_path: Path
) -> None:
    assert script("backup.sh", str(tmp_path / "b"), env=docker).returncode == 0
    (backup,) = (tmp_path / "b").iterdir()
    (backup / "postgres.dump").write_bytes(b"PGDMP-tampered")
    Path(docker["FAKE_DOCKER_LOG"]).unlink()
    done = script("restore.sh", str(backup), env=docker)
    assert done.returncode != 0 and "SHA256SUMS" in done.stderr
    assert [argv for argv, _ in calls(docker)] == ["compose version"]

    done = script("restore.sh", str(tmp_path), env=docker)
    assert done.returncode != 0 and "not a her-os backup" in done.stderr


def test_rebuild_needs_yes_then_drops_only_the_derived_volumes(
    docker: dict[str, str], tmp_path: Path
) -> None:
    done = script("rebuild.sh", env=docker)
    assert done.returncode != 0 and "--yes" in done.stderr
    assert [argv for argv, _ in calls(docker)] == ["compose version"]

    done = script("rebuild.sh", "--yes", env=docker)
    assert done.returncode == 0, done.stderr
    commands = [argv for argv, _ in calls(docker)]
    removed = sorted(c.split()[-1] for c in commands if c.startswith("volume rm"))
    assert removed == [
        "her-os_neo4j-data", "her-os_postgres-data", "her-os_qdrant-data", "her-os_search-index",
    ]  # fmt: skip
    assert commands.index("compose down") < commands.index("volume rm her-os_postgres-data")
    assert commands[-1] == "compose up -d"
