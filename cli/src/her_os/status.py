"""What runs, where, and whether it is healthy: shared by `status`, `up` and `down`."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

from her_os import credentials, dashboard, falkordb, postgres
from her_os.config import PORT_SETTINGS, Settings
from her_os.health import Probe, http_health
from her_os.paths import DataLayout
from her_os.services import SERVICES
from her_os.state import Component, RunState, read_state

COMPONENTS: tuple[str, ...] = tuple(spec.component for spec in PORT_SETTINGS)


@dataclass(frozen=True)
class Endpoint:
    name: str
    url: str
    docs: str | None = None
    note: str = ""


def endpoints(settings: Settings, host: str, ports: Mapping[str, int]) -> list[Endpoint]:
    """Where to reach each component; no passwords (they stay in data/secrets/)."""
    result = [
        Endpoint(
            service.name,
            service.base_url(host, ports[service.name]),
            service.base_url(host, ports[service.name]) + "/docs",
        )
        for service in SERVICES
        if service.name in ports
    ]
    if dashboard.NAME in ports:
        result.append(
            Endpoint(
                dashboard.NAME,
                dashboard.url(settings, host, ports[dashboard.NAME]),
                note="asks once for the internal token below (kept in the browser)",
            )
        )
    if postgres.NAME in ports:
        pg = f"{settings.postgres_user}@{host}:{ports[postgres.NAME]}/{settings.postgres_db}"
        note = f"password: secrets/{credentials.POSTGRES_PASSWORD}"
        result.append(Endpoint(postgres.NAME, f"postgresql://{pg}", note=note))
    if falkordb.NAME in ports:
        fk = f"redis://{host}:{ports[falkordb.NAME]}"
        note = f"password: secrets/{credentials.FALKORDB_PASSWORD}"
        result.append(Endpoint(falkordb.NAME, fk, note=note))
    return result


@dataclass(frozen=True)
class ComponentStatus:
    name: str
    pid: int | None
    alive: bool
    port: int
    healthy: bool
    detail: str


def _probe(name: str, host: str, port: int, settings: Settings, layout: DataLayout) -> Probe:
    if name == postgres.NAME:
        return postgres.probe(host, port, settings.postgres_user)
    if name == falkordb.NAME:
        creds = credentials.load(layout.secrets)
        return falkordb.probe(host, port, creds.falkordb_password if creds else None)
    if name == dashboard.NAME:
        return dashboard.probe(dashboard.url(settings, host, port))
    return http_health(f"http://{host}:{port}/health")


def _component_status(
    name: str, comp: Component | None, port: int, host: str, settings: Settings, layout: DataLayout
) -> ComponentStatus:
    if comp is None or not comp.process.alive():
        pid = comp.process.pid if comp else None
        return ComponentStatus(name, pid, False, port, False, "not running")
    probe = _probe(name, host, port, settings, layout)
    return ComponentStatus(name, comp.process.pid, True, port, probe.healthy, probe.detail)


def collect(settings: Settings) -> dict[str, Any]:
    """The machine-readable status (`her-os status --json`)."""
    layout = DataLayout(settings.resolved_data_dir)
    state: RunState | None = read_state(layout.state_file)
    running = state is not None and state.supervisor.alive()
    host = state.connect_host if running and state else settings.connect_host
    recorded = state.components if running and state else {}
    # A component the running `up` chose not to start (the dashboard, unbuilt) is not down.
    skipped = state.skipped if running and state else {}
    specs = [spec for spec in PORT_SETTINGS if spec.component not in skipped]

    def one(spec_index: int) -> ComponentStatus:
        spec = specs[spec_index]
        comp = recorded.get(spec.component)
        port = comp.port if comp else int(getattr(settings, spec.field))
        return _component_status(spec.component, comp, port, host, settings, layout)

    # Probes wait on the network; run them side by side so `status` answers quickly.
    with ThreadPoolExecutor(max_workers=len(specs)) as pool:
        statuses = list(pool.map(one, range(len(specs))))
    return {
        "running": running,
        "healthy": running and all(s.healthy for s in statuses),
        "phase": state.phase if running and state else "stopped",
        "data_dir": str(layout.root),
        "started_at": state.started_at if running and state else None,
        "supervisor": {
            "pid": state.supervisor.pid if running and state else None,
            "alive": running,
        },
        "components": {s.name: asdict(s) for s in statuses},
        "skipped": dict(skipped),
    }
