"""`her-os backup`, `restore` and `rebuild` on data directories made here (no servers; the
round trip through a real platform is in test_platform_backup.py)."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from her_os import backup as backups
from her_os.paths import DataLayout
from her_os.state import ProcessRef, RunState, SupervisorLock, write_state


def make_data(root: Path) -> DataLayout:
    layout = DataLayout(root)
    layout.create()
    files = {
        "transcripts/s1.jsonl": b'{"session_id": "s1"}\n',
        "transcripts/s2.jsonl": b'{"session_id": "s2"}\n' * 100,
        "events/audio.jsonl": b'{"event": 1}\n',
        "enrollment/bank.json": b"{}",
        "postgres/PG_VERSION": b"18\n",
        "postgres/base/1/1259": os.urandom(8192),
        "postgres/postmaster.pid": b"12345\n",  # left by a crash: never restored
        "falkordb/appendonlydir/graph.aof": b"*1\r\n",
        "vectors/shard/segment.bin": os.urandom(4096),
        "search-index/meta.json": b"{}",
        "secrets/internal_token": b"t" * 43,
        "logs/context-engine.log": b"log\n",
    }
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (root / "postgres").chmod(0o700)
    return layout


def tree(root: Path, names: tuple[str, ...]) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for name in names
        for p in sorted((root / name).rglob("*"))
        if p.is_file()
    }


BACKED_UP = tuple(name for name, _ in backups.COMPONENTS)


def test_round_trip(tmp_path: Path) -> None:
    source = make_data(tmp_path / "a")
    result = backups.backup(source)
    assert result.path.parent == source.root / "backups"
    assert stat.S_IMODE(result.path.stat().st_mode) == 0o600
    assert result.components["transcripts"] == {"files": 2, "bytes": 21 + 2100}
    manifest = backups.read_manifest(result.path)
    assert manifest["postgres_version"] == "18"
    assert set(manifest["components"]) == set(BACKED_UP)

    target = DataLayout(tmp_path / "b")
    restored = backups.restore(target, result.path)
    expected = tree(source.root, BACKED_UP)
    del expected["postgres/postmaster.pid"]
    assert tree(target.root, BACKED_UP) == expected
    assert restored.components == result.components
    assert result.components["postgres"] == {"files": 2, "bytes": 3 + 8192}  # no postmaster.pid
    assert stat.S_IMODE((target.root / "postgres").stat().st_mode) == 0o700
    # Not in a backup: the keyword index (rebuilt from PostgreSQL) and the logs.
    assert not (target.root / "search-index").exists()
    assert not (target.root / "logs" / "context-engine.log").exists()


def test_restore_moves_what_it_replaces_aside(tmp_path: Path) -> None:
    layout = make_data(tmp_path / "d")
    archive = backups.backup(layout, tmp_path / "b.tar.gz").path
    (layout.transcripts / "s3.jsonl").write_bytes(b"newer\n")
    result = backups.restore(layout, archive)
    assert result.path.name.startswith("pre-restore-")
    assert (result.path / "transcripts" / "s3.jsonl").read_bytes() == b"newer\n"
    assert (result.path / "search-index" / "meta.json").exists()  # stale against the restore
    assert not (layout.transcripts / "s3.jsonl").exists()
    assert sorted(p.name for p in layout.transcripts.iterdir()) == ["s1.jsonl", "s2.jsonl"]


def running(layout: DataLayout) -> None:
    me = ProcessRef.of(os.getpid())
    assert me is not None
    write_state(
        layout.state_file,
        RunState(
            supervisor=me,
            started_at="2026-01-01T00:00:00+00:00",
            data_dir=str(layout.root),
            host="127.0.0.1",
            connect_host="127.0.0.1",
        ),
    )


@pytest.mark.parametrize("action", ["backup", "restore", "rebuild"])
def test_refuses_while_the_platform_runs(tmp_path: Path, action: str) -> None:
    layout = make_data(tmp_path / "d")
    archive = backups.backup(layout, tmp_path / "b.tar.gz").path
    running(layout)
    with pytest.raises(backups.BackupError, match="her-os down"):
        if action == "backup":
            backups.backup(layout, tmp_path / "c.tar.gz")
        elif action == "restore":
            backups.restore(layout, archive)
        else:
            backups.rebuild(layout)
    assert not (tmp_path / "c.tar.gz").exists()
    assert (layout.postgres / "PG_VERSION").exists()


def test_refuses_while_up_holds_the_lock(tmp_path: Path) -> None:
    layout = make_data(tmp_path / "d")
    lock = SupervisorLock(layout.lock_file)
    assert lock.acquire()
    try:
        with pytest.raises(backups.BackupError, match="starting"):
            backups.backup(layout)
    finally:
        lock.release()


def test_an_existing_output_is_not_overwritten(tmp_path: Path) -> None:
    layout = make_data(tmp_path / "d")
    out = tmp_path / "b.tar.gz"
    out.write_bytes(b"keep")
    with pytest.raises(backups.BackupError, match="exists"):
        backups.backup(layout, out)
    assert out.read_bytes() == b"keep"


def test_an_empty_data_dir_is_not_backed_up(tmp_path: Path) -> None:
    layout = DataLayout(tmp_path / "d")
    layout.create()
    with pytest.raises(backups.BackupError, match="no her-os data"):
        backups.backup(layout)


def _archive(path: Path, manifest: dict | None, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        entries = dict(members)
        if manifest is not None:
            entries = {backups.MANIFEST: json.dumps(manifest).encode(), **entries}
        for name, data in entries.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


@pytest.mark.parametrize(
    ("manifest", "members", "error"),
    [
        (None, {"transcripts/a.jsonl": b"x"}, "no manifest"),
        ({"format": "something else", "components": {}}, {}, "unknown backup format"),
        (
            {"format": backups.FORMAT, "components": {"transcripts": {"files": 1, "bytes": 1}}},
            {"transcripts/../../escape": b"x"},
            "unexpected member",
        ),
        (
            {"format": backups.FORMAT, "components": {"transcripts": {"files": 1, "bytes": 1}}},
            {"etc/passwd": b"x"},
            "unexpected member",
        ),
    ],
)
def test_a_bad_archive_is_refused_before_anything_moves(
    tmp_path: Path, manifest: dict | None, members: dict[str, bytes], error: str
) -> None:
    layout = make_data(tmp_path / "d")
    before = tree(layout.root, BACKED_UP)
    bad = _archive(tmp_path / "bad.tar.gz", manifest, members)
    with pytest.raises(backups.BackupError, match=error):
        backups.restore(layout, bad)
    assert tree(layout.root, BACKED_UP) == before
    assert not list(layout.root.glob("pre-restore-*"))


def test_not_an_archive_at_all(tmp_path: Path) -> None:
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"not a tar")
    with pytest.raises(backups.BackupError, match="cannot be read"):
        backups.read_manifest(junk)


def test_rebuild_moves_the_derived_stores_aside(tmp_path: Path) -> None:
    layout = make_data(tmp_path / "d")
    result = backups.rebuild(layout)
    assert set(result.components) == set(backups.DERIVED)
    for name in backups.DERIVED:
        assert not (layout.root / name).exists()
        assert (result.path / name).is_dir()
    # The source of truth and what is not derived from it stay.
    for name in ("transcripts", "events", "enrollment", "secrets"):
        assert (layout.root / name).is_dir()


def test_rebuild_needs_transcripts(tmp_path: Path) -> None:
    layout = make_data(tmp_path / "d")
    for path in layout.transcripts.iterdir():
        path.unlink()
    with pytest.raises(backups.BackupError, match="nothing to rebuild from"):
        backups.rebuild(layout)
    assert layout.postgres.exists()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HER_OS_")}
    return subprocess.run(
        [sys.executable, "-m", "her_os", *args],
        capture_output=True, text=True, env=env | {"COLUMNS": "200"}, timeout=120, check=False,
    )  # fmt: skip


def test_the_commands(tmp_path: Path) -> None:
    layout = make_data(tmp_path / "d")
    out = tmp_path / "x.tar.gz"
    done = _cli("backup", "--data-dir", str(layout.root), "--output", str(out))
    assert done.returncode == 0, done.stderr
    assert f"backup written to {out}" in done.stdout.replace("\n", "")
    assert "transcripts: 2 files" in done.stdout

    done = _cli("rebuild", "--data-dir", str(layout.root))
    assert done.returncode == 1 and "--yes" in done.stdout
    assert layout.postgres.exists()
    done = _cli("rebuild", "--data-dir", str(layout.root), "--yes")
    assert done.returncode == 0, done.stderr
    assert not layout.postgres.exists()

    done = _cli("restore", str(out), "--data-dir", str(layout.root))
    assert done.returncode == 0, done.stderr
    assert (layout.postgres / "PG_VERSION").read_bytes() == b"18\n"

    done = _cli("restore", str(tmp_path / "missing.tar.gz"), "--data-dir", str(layout.root))
    assert done.returncode == 1 and "cannot be read" in done.stderr
