"""Backup, restore and rebuild of an embedded platform's data directory (`her-os backup`,
`her-os restore`, `her-os rebuild`).

A backup is one `.tar.gz` (mode 0600: it holds every memory and the generated secrets) whose
first member is a manifest, and whose directories are those of a data directory, so a restore
is the same whichever way it was taken:

- platform stopped: a cold copy of the files (the supervisor's lock is held meanwhile, so
  `her-os up` cannot start under it), exactly consistent, the vector index included;
- platform running: PostgreSQL through `pg_basebackup` (a consistent physical copy with the
  WAL it needs, checked by `pg_verifybackup`), FalkorDB's append-only files right after a
  `BGREWRITEAOF` (redis loads a tail cut mid-write up to its last whole command), then the
  JSONL files (taken last: newer lines than PostgreSQL holds are simply ingested after a
  restore). The vector index is left out: it cannot be copied consistently while the engine
  writes it, and after a restore the engine sees it missing and embeds again from PostgreSQL.

Restore and rebuild never delete: what they replace is moved aside into
`<data>/pre-restore-<time>/` or `<data>/pre-rebuild-<time>/`.

Rebuild re-derives the stores from the JSONL files: PostgreSQL, FalkorDB, the vectors and the
keyword index are moved aside, and the next `her-os up` starts on an empty database, where
the context engine ingests every transcript and redoes extraction, the graph and embeddings.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

import redis

from her_os import credentials, falkordb, postgres
from her_os.paths import DataLayout
from her_os.state import RunState, SupervisorLock, live_state

FORMAT = "her-os embedded backup 1"
MANIFEST = "her-os-backup.json"

# What a backup holds (directories under the data directory), in restore order. The keyword
# index and the assembled models are left out: both are rebuilt (from PostgreSQL, from the
# wheels) when missing.
COMPONENTS: tuple[tuple[str, str], ...] = (
    ("secrets", "generated token and passwords (PostgreSQL's is part of its data directory)"),
    ("transcripts", "the JSONL transcripts: the source of truth"),
    ("events", "the audio pipeline's observability events (JSONL)"),
    ("enrollment", "the speaker enrollment bank"),
    ("postgres", "PostgreSQL's data directory"),
    ("falkordb", "FalkorDB's append-only file and snapshot (the knowledge graph)"),
    ("vectors", "the vector index (Qdrant Edge)"),
)
# Moved aside by a restore besides the components: derived from what is restored.
DERIVED_ON_RESTORE = ("search-index",)
# What a rebuild moves aside: everything derived from the transcripts.
DERIVED = ("postgres", "falkordb", "vectors", "search-index")


class BackupError(RuntimeError):
    """The backup, restore or rebuild cannot proceed; the message says why."""


@dataclass(frozen=True)
class Result:
    path: Path  # the archive written, or the folder things were moved aside into
    components: dict[str, dict[str, int]]  # name -> {"files", "bytes"}
    live: bool = False  # a backup taken while the platform ran (no vector index)


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


@contextmanager
def _stopped(layout: DataLayout, what: str) -> Iterator[None]:
    """Hold the supervisor's lock (no `up` can start) after checking nothing runs."""
    state = live_state(layout.state_file)
    if state is not None:
        raise BackupError(
            f"her-os is running on {layout.root} (supervisor pid {state.supervisor.pid}); "
            f"stop it first with `her-os down`, then {what}"
        )
    layout.run.mkdir(parents=True, exist_ok=True)
    lock = SupervisorLock(layout.lock_file)
    if not lock.acquire():
        raise BackupError(f"her-os is starting on {layout.root}; stop it first with `her-os down`")
    try:
        yield
    finally:
        lock.release()


# Files a stopped server leaves none of, but a crashed one may: never backed up or restored.
_RUNTIME_FILES = ("postmaster.pid", "postmaster.opts")


def _tree_size(path: Path) -> dict[str, int]:
    files = size = 0
    for entry in path.rglob("*"):
        if entry.is_file() and not entry.is_symlink() and entry.name not in _RUNTIME_FILES:
            files += 1
            size += entry.stat().st_size
    return {"files": files, "bytes": size}


def _private_file(path: Path) -> io.BufferedWriter:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    return os.fdopen(fd, "wb")


def _skip_runtime_files(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    if PurePosixPath(info.name).name in _RUNTIME_FILES:
        return None
    return info


def backup(layout: DataLayout, output: Path | None = None, postgres_user: str = "heros") -> Result:
    """Write a snapshot of the data directory to `output` (default:
    `<data>/backups/her-os-<time>.tar.gz`): cold when the platform is stopped, live when it
    runs (see the module's docstring)."""
    if not layout.root.is_dir():
        raise BackupError(f"no data directory at {layout.root}")
    target = output or layout.root / "backups" / f"her-os-{_stamp()}.tar.gz"
    state = live_state(layout.state_file)
    if state is not None:
        return _backup_live(layout, state, target, postgres_user)
    with _stopped(layout, "run `her-os backup` again"):
        present = [name for name, _ in COMPONENTS if (layout.root / name).is_dir()]
        has_transcripts = layout.transcripts.is_dir() and any(layout.transcripts.iterdir())
        if "postgres" not in present and not has_transcripts:
            raise BackupError(f"{layout.root} holds no her-os data (no postgres/, no transcripts/)")
        return _write_archive(layout.root, present, target, live=False)


def _write_archive(source: Path, names: list[str], target: Path, *, live: bool) -> Result:
    """The archive of `names` (directories under `source`), manifest first."""
    sizes = {name: _tree_size(source / name) for name in names}
    pg_version = source / "postgres" / "PG_VERSION"
    manifest = {
        "format": FORMAT,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "live": live,
        "postgres_version": pg_version.read_text().strip() if pg_version.exists() else None,
        "components": sizes,
    }
    body = json.dumps(manifest, indent=2).encode()
    try:
        with _private_file(target) as raw, tarfile.open(fileobj=raw, mode="w:gz") as tar:
            info = tarfile.TarInfo(MANIFEST)
            info.size = len(body)
            info.mtime = int(datetime.now(UTC).timestamp())
            info.mode = 0o600
            tar.addfile(info, io.BytesIO(body))
            for name in names:
                tar.add(source / name, arcname=name, filter=_skip_runtime_files)
    except FileExistsError:
        raise BackupError(f"{target} exists already; name another file") from None
    except BaseException:
        target.unlink(missing_ok=True)
        raise
    return Result(target, sizes, live)


def _backup_live(layout: DataLayout, state: RunState, target: Path, postgres_user: str) -> Result:
    creds = credentials.load(layout.secrets)
    pg, graph = state.components.get(postgres.NAME), state.components.get(falkordb.NAME)
    if creds is None or pg is None or graph is None or state.phase != "running":
        raise BackupError(
            f"her-os is {state.phase} on {layout.root}: wait until it runs, or stop it with "
            "`her-os down` for a cold backup"
        )
    if target.exists():
        raise BackupError(f"{target} exists already; name another file")
    staging = Path(tempfile.mkdtemp(prefix=".backup-", dir=layout.root))
    try:
        _pg_basebackup(state.connect_host, pg.port, postgres_user, creds, staging / "postgres")
        _falkordb_copy(state.connect_host, graph.port, creds, layout.falkordb, staging / "falkordb")
        names = ["postgres", "falkordb"]
        for name in ("secrets", "transcripts", "events", "enrollment"):
            if (layout.root / name).is_dir():
                shutil.copytree(layout.root / name, staging / name)
                names.append(name)
        ordered = [name for name, _ in COMPONENTS if name in names]
        return _write_archive(staging, ordered, target, live=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _run(argv: list[str], env: dict[str, str], what: str) -> None:
    try:
        done = subprocess.run(  # noqa: S603 - argv is built here
            argv, capture_output=True, text=True, env=env, timeout=3600, check=False
        )
    except subprocess.TimeoutExpired:
        raise BackupError(f"{what} did not finish within an hour") from None
    if done.returncode != 0:
        raise BackupError(f"{what} failed: {done.stderr.strip()[-2000:]}")


def _pg_basebackup(
    host: str, port: int, user: str, creds: credentials.Credentials, dest: Path
) -> None:
    """A consistent physical copy of the running cluster, with the WAL that makes it so."""
    env = postgres.client_env(creds.postgres_password)
    _run(
        [str(postgres.binary("pg_basebackup")), "-h", host, "-p", str(port), "-U", user,
         "-D", str(dest), "-F", "plain", "-X", "stream", "-c", "fast", "--no-password"],
        env, "pg_basebackup",
    )  # fmt: skip
    _run([str(postgres.binary("pg_verifybackup")), str(dest)], env, "pg_verifybackup")


def _aof_manifest(directory: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(directory.glob("appendonlydir/*.manifest")))


def _falkordb_copy(
    host: str, port: int, creds: credentials.Credentials, source: Path, dest: Path
) -> None:
    """FalkorDB's files right after a rewrite of its append-only file: a fresh base snapshot
    and a short tail. Copied again if another rewrite replaced the files meanwhile."""
    conn = falkordb.client(host, port, creds.falkordb_password)
    try:
        before = int(conn.info("persistence").get("aof_rewrites", 0))
        conn.execute_command("BGREWRITEAOF")
        deadline = time.monotonic() + 600
        while True:
            info = conn.info("persistence")
            done = int(info.get("aof_rewrites", 0)) > before
            if done and not info["aof_rewrite_in_progress"] and not info["aof_rewrite_scheduled"]:
                break
            if time.monotonic() > deadline:
                raise BackupError("FalkorDB did not finish rewriting its append-only file")
            time.sleep(0.05)
        if info.get("aof_last_bgrewrite_status") != "ok":
            raise BackupError("FalkorDB could not rewrite its append-only file (see its log)")
    except redis.RedisError as exc:
        raise BackupError(f"FalkorDB did not answer: {exc}") from None
    finally:
        conn.close()
    for _ in range(3):
        manifest = _aof_manifest(source)
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(source, dest)
        if manifest and _aof_manifest(source) == manifest == _aof_manifest(dest):
            return
    raise BackupError(f"FalkorDB's files in {source} kept changing; try again")


def read_manifest(archive: Path) -> dict:
    """The manifest of a backup, checked: its format and that every member belongs to a
    component it names (no absolute paths, no `..`)."""
    try:
        with tarfile.open(archive, mode="r:gz") as tar:
            first = tar.next()
            if first is None or first.name != MANIFEST:
                raise BackupError(f"{archive} is not a her-os backup (no manifest first)")
            handle = tar.extractfile(first)
            assert handle is not None
            manifest = json.loads(handle.read())
            if manifest.get("format") != FORMAT:
                raise BackupError(f"{archive}: unknown backup format {manifest.get('format')!r}")
            known = set(manifest["components"])
            for member in tar:
                if member.name == MANIFEST:
                    continue
                parts = PurePosixPath(member.name).parts
                if (
                    not parts
                    or parts[0] not in known
                    or ".." in parts
                    or member.name.startswith("/")
                ):
                    raise BackupError(f"{archive}: unexpected member {member.name!r}")
    except (tarfile.TarError, OSError, EOFError, json.JSONDecodeError) as exc:
        raise BackupError(f"{archive} cannot be read as a her-os backup: {exc}") from None
    return manifest


def _move_aside(layout: DataLayout, names: tuple[str, ...] | list[str], prefix: str) -> Path:
    aside = layout.root / f"{prefix}-{_stamp()}"
    for name in names:
        source = layout.root / name
        if source.exists():
            aside.mkdir(mode=0o700, exist_ok=True)
            shutil.move(source, aside / name)
    return aside


def restore(layout: DataLayout, archive: Path) -> Result:
    """Unpack a backup into the data directory; what it replaces is moved aside."""
    manifest = read_manifest(archive)
    layout.root.mkdir(parents=True, exist_ok=True)
    with _stopped(layout, "run `her-os restore` again"):
        names = list(manifest["components"])
        # Every store, not only those in the archive: a live backup has no vector index,
        # and the current one must not sit beside a restored database.
        everything = [name for name, _ in COMPONENTS] + list(DERIVED_ON_RESTORE)
        aside = _move_aside(layout, everything, "pre-restore")
        with tarfile.open(archive, mode="r:gz") as tar:
            members = [m for m in tar.getmembers() if m.name != MANIFEST]
            # "tar": keeps owners and modes (PGDATA must stay 0700 and its owner's) while
            # still refusing absolute paths, links out of the tree and device files.
            tar.extractall(layout.root, members=members, filter="tar")
        restored = {name: _tree_size(layout.root / name) for name in names}
        for name, expected in manifest["components"].items():
            if restored[name]["files"] != expected["files"]:
                raise BackupError(
                    f"{name}: {restored[name]['files']} files restored, the manifest says "
                    f"{expected['files']}"
                )
        return Result(aside, restored)


def rebuild(layout: DataLayout) -> Result:
    """Move the derived stores aside; the next `her-os up` re-derives them from the JSONL."""
    if not (layout.transcripts.is_dir() and any(layout.transcripts.iterdir())):
        raise BackupError(
            f"no transcripts in {layout.transcripts}: nothing to rebuild from (restore a backup)"
        )
    with _stopped(layout, "run `her-os rebuild` again"):
        moved = {
            name: _tree_size(layout.root / name)
            for name in DERIVED
            if (layout.root / name).exists()
        }
        aside = _move_aside(layout, DERIVED, "pre-rebuild")
        return Result(aside, moved)
