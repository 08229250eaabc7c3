"""Backup, restore and rebuild of an embedded platform's data directory (`her-os backup`,
`her-os restore`, `her-os rebuild`).

A backup is a cold snapshot: it runs while the platform is stopped (it holds the supervisor's
lock meanwhile, so `her-os up` cannot start under it), which makes the copy of PostgreSQL's
and FalkorDB's files exactly consistent without any server running. One `.tar.gz` (mode 0600:
it holds every memory and the generated secrets) whose first member is a manifest.

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
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from her_os.paths import DataLayout
from her_os.state import SupervisorLock, live_state

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


def backup(layout: DataLayout, output: Path | None = None) -> Result:
    """Write a cold snapshot of the data directory to `output` (default:
    `<data>/backups/her-os-<time>.tar.gz`)."""
    if not layout.root.is_dir():
        raise BackupError(f"no data directory at {layout.root}")
    with _stopped(layout, "run `her-os backup` again"):
        present = [name for name, _ in COMPONENTS if (layout.root / name).is_dir()]
        has_transcripts = layout.transcripts.is_dir() and any(layout.transcripts.iterdir())
        if "postgres" not in present and not has_transcripts:
            raise BackupError(f"{layout.root} holds no her-os data (no postgres/, no transcripts/)")
        sizes = {name: _tree_size(layout.root / name) for name in present}
        pg_version = layout.postgres / "PG_VERSION"
        manifest = {
            "format": FORMAT,
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "data_dir": str(layout.root),
            "postgres_version": pg_version.read_text().strip() if pg_version.exists() else None,
            "components": sizes,
        }
        target = output or layout.root / "backups" / f"her-os-{_stamp()}.tar.gz"
        body = json.dumps(manifest, indent=2).encode()
        try:
            with _private_file(target) as raw, tarfile.open(fileobj=raw, mode="w:gz") as tar:
                info = tarfile.TarInfo(MANIFEST)
                info.size = len(body)
                info.mtime = int(datetime.now(UTC).timestamp())
                info.mode = 0o600
                tar.addfile(info, io.BytesIO(body))
                for name in present:
                    tar.add(layout.root / name, arcname=name, filter=_skip_runtime_files)
        except FileExistsError:
            raise BackupError(f"{target} exists already; name another file") from None
        except BaseException:
            target.unlink(missing_ok=True)
            raise
        return Result(target, sizes)


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
        aside = _move_aside(layout, [*names, *DERIVED_ON_RESTORE], "pre-restore")
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
