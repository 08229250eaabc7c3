"""Port checks done before anything starts, so a collision fails fast with a clear fix."""

from __future__ import annotations

import errno
import socket

from her_os.config import PORT_SETTINGS, Settings


class PortError(RuntimeError):
    """A configured port cannot be used; the message says which setting changes it."""


def port_is_free(host: str, port: int) -> bool:
    """True when a server could bind host:port now. SO_REUSEADDR mirrors what PostgreSQL,
    Redis and uvicorn set, so a port held only by TIME_WAIT connections counts as free."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def check_ports(settings: Settings) -> None:
    """Raise PortError for the first port that is taken or configured twice."""
    seen: dict[int, str] = {}
    for spec in PORT_SETTINGS:
        if spec.field == "dashboard_port" and not settings.dashboard:
            continue  # not served: its port is nobody's business
        port: int = getattr(settings, spec.field)
        if port in seen:
            raise PortError(
                f"port {port} is configured for both {seen[port]} and {spec.component}: "
                f"give {spec.component} another port with {spec.option} or {spec.env}"
            )
        seen[port] = spec.component
        if not port_is_free(settings.host, port):
            raise PortError(
                f"port {port} on {settings.host} ({spec.component}) is already in use: "
                f"stop whatever holds it, or choose another port with {spec.option} "
                f"or the environment variable {spec.env}"
            )
