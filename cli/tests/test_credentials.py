from __future__ import annotations

import os
import stat

from her_os import credentials


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_generated_once_then_reused(tmp_path):
    secrets_dir = tmp_path / "secrets"
    first = credentials.load_or_create(secrets_dir)
    second = credentials.load_or_create(secrets_dir)
    assert first == second
    assert credentials.load(secrets_dir) == first


def test_values_are_distinct_strong_and_url_safe(tmp_path):
    creds = credentials.load_or_create(tmp_path / "secrets")
    values = [creds.internal_token, creds.postgres_password, creds.falkordb_password]
    assert len(set(values)) == 3
    for value in values:
        assert len(value) >= 40  # token_urlsafe(32) gives 43 characters
        assert all(c.isalnum() or c in "-_" for c in value)


def test_file_modes_are_private(tmp_path):
    secrets_dir = tmp_path / "secrets"
    credentials.load_or_create(secrets_dir)
    assert _mode(secrets_dir) == 0o700
    for name in credentials.NAMES:
        assert _mode(secrets_dir / name) == 0o600


def test_loose_modes_are_tightened_and_values_kept(tmp_path):
    secrets_dir = tmp_path / "secrets"
    creds = credentials.load_or_create(secrets_dir)
    os.chmod(secrets_dir, 0o755)
    os.chmod(secrets_dir / credentials.INTERNAL_TOKEN, 0o644)
    assert credentials.load_or_create(secrets_dir) == creds
    assert _mode(secrets_dir) == 0o700
    assert _mode(secrets_dir / credentials.INTERNAL_TOKEN) == 0o600


def test_only_missing_secrets_are_generated(tmp_path):
    secrets_dir = tmp_path / "secrets"
    creds = credentials.load_or_create(secrets_dir)
    (secrets_dir / credentials.FALKORDB_PASSWORD).unlink()
    (secrets_dir / credentials.POSTGRES_PASSWORD).write_text("")  # empty counts as missing
    again = credentials.load_or_create(secrets_dir)
    assert again.internal_token == creds.internal_token
    assert again.falkordb_password != creds.falkordb_password
    assert again.postgres_password not in ("", creds.postgres_password)


def test_load_does_not_create(tmp_path):
    secrets_dir = tmp_path / "secrets"
    assert credentials.load(secrets_dir) is None
    assert not secrets_dir.exists()


def test_repr_hides_secrets(tmp_path):
    creds = credentials.load_or_create(tmp_path / "secrets")
    assert creds.internal_token not in repr(creds)
