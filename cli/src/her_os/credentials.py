"""Secrets of a data directory: generated on first `up`, then reused, never printed to logs.

Each secret is one file in data/secrets/ (directory 0700, files 0600). Reuse matters: the
PostgreSQL password is baked into PGDATA by initdb, and clients keep the internal token.
"""

from __future__ import annotations

import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

# File names under data/secrets/ (not secrets themselves).
INTERNAL_TOKEN = "internal_token"  # noqa: S105
POSTGRES_PASSWORD = "postgres_password"  # noqa: S105
FALKORDB_PASSWORD = "falkordb_password"  # noqa: S105
NAMES = (INTERNAL_TOKEN, POSTGRES_PASSWORD, FALKORDB_PASSWORD)


@dataclass(frozen=True)
class Credentials:
    internal_token: str
    postgres_password: str
    falkordb_password: str

    def __repr__(self) -> str:  # keep secrets out of tracebacks and debug output
        return "Credentials(<redacted>)"


def _generate() -> str:
    # URL-safe alphabet: the values go into database URLs and config files unquoted.
    return secrets.token_urlsafe(32)


def _read(path: Path) -> str | None:
    try:
        value = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    return value or None


def _private(path: Path, mode: int) -> None:
    if stat.S_IMODE(path.stat().st_mode) != mode:
        os.chmod(path, mode)


def _create(path: Path, value: str) -> str:
    """Write a new secret file with mode 0600 from the start; if another process won the
    race and wrote it first, use theirs."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        existing = _read(path)
        if existing is None:
            raise RuntimeError(f"secret file {path} exists but is empty") from None
        return existing
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(value + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    return value


def load_or_create(secrets_dir: Path) -> Credentials:
    """Read every secret, generating the missing ones. Tightens loose file modes."""
    secrets_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    _private(secrets_dir, 0o700)
    values: dict[str, str] = {}
    for name in NAMES:
        path = secrets_dir / name
        value = _read(path)
        if value is None:
            path.unlink(missing_ok=True)  # an empty file is as good as none
            value = _create(path, _generate())
        _private(path, 0o600)
        values[name] = value
    return Credentials(**values)


def load(secrets_dir: Path) -> Credentials | None:
    """Read the secrets without creating any; None when some are missing or unreadable."""
    values: dict[str, str] = {}
    for name in NAMES:
        try:
            value = _read(secrets_dir / name)
        except PermissionError:
            return None
        if value is None:
            return None
        values[name] = value
    return Credentials(**values)
