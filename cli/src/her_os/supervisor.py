"""`her-os up`: start PostgreSQL, FalkorDB and the services in order, watch them, and stop
them in reverse order on Ctrl-C/SIGTERM or when one dies. Nothing outlives the supervisor:
every exit path goes through `_shutdown`, and children get a parent-death signal from the
kernel should the supervisor itself be killed."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from types import FrameType
from typing import Any

from rich.text import Text

from her_os import control, credentials, dashboard, falkordb, postgres, ui
from her_os.config import Settings
from her_os.credentials import Credentials
from her_os.eventlog import EventLog
from her_os.health import Probe, StartupError, StopRequested, http_health, wait_until
from her_os.logs import tail_text
from her_os.paths import SUPERVISOR, DataLayout
from her_os.ports import PortError, check_ports
from her_os.process import ManagedProcess, RunAs, stop_together
from her_os.services import CONTEXT_ENGINE, SERVICES, Service, service_env
from her_os.state import (
    Component,
    ProcessRef,
    RunState,
    SupervisorLock,
    read_state,
    remove_state,
    write_state,
)
from her_os.status import endpoints

_HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# FalkorDB writes its final snapshot on SIGTERM; PostgreSQL checkpoints on fast shutdown.
_FALKORDB_STOP_S = 30.0
_POSTGRES_STOP_S = 60.0


class Supervisor:
    def __init__(self, settings: Settings, layout: DataLayout, creds: Credentials) -> None:
        self.settings = settings
        self.layout = layout
        self.creds = creds
        self.events = EventLog(layout.log_file(SUPERVISOR))
        self._stop = threading.Event()
        self._signal: str | None = None
        self._procs: dict[str, ManagedProcess] = {}  # in start order
        self.state = RunState(
            supervisor=ProcessRef.of(os.getpid()) or ProcessRef(os.getpid(), time.time()),
            started_at=datetime.now(UTC).isoformat(timespec="seconds"),
            data_dir=str(layout.root),
            host=settings.host,
            connect_host=settings.connect_host,
        )

    # -- signals -------------------------------------------------------------------------

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        # Only set a flag: the main loop and the startup waits act on it between steps, so a
        # signal never lands in the middle of starting a child and loses track of it.
        if self._signal is None:
            self._signal = signal.Signals(signum).name
        self._stop.set()

    @contextmanager
    def _signals(self) -> Iterator[None]:
        previous = {sig: signal.signal(sig, self._on_signal) for sig in _HANDLED_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    # -- lifecycle -----------------------------------------------------------------------

    def run(self) -> int:
        """Start everything, wait, stop everything. Returns the exit code."""
        with self._signals():
            try:
                self._save_state()
                self.events.write("supervisor.starting", data_dir=str(self.layout.root))
                try:
                    self._start_postgres()
                    self._start_falkordb()
                    self._start_services()
                    self._start_dashboard()
                except StopRequested:
                    ui.note(f"{self._signal} received while starting; stopping.")
                    self.events.write("supervisor.stop_requested", signal=self._signal)
                    return 0
                except StartupError as exc:
                    self.events.write("supervisor.start_failed", level="error", error=str(exc))
                    return 1
                self.state.phase = "running"
                self._save_state()
                self.events.write("supervisor.running")
                self._print_ready()
                return self._watch()
            finally:
                self._shutdown()
                remove_state(self.layout.state_file)
                self.events.write("supervisor.stopped")

    def _watch(self) -> int:
        while not self._stop.wait(0.5):
            for proc in self._procs.values():
                code = proc.exit_code()
                if code is not None:
                    ui.fail(
                        f"{proc.name} exited unexpectedly with code {code}; stopping everything",
                        tail_text(proc.log_path),
                        proc.log_path,
                    )
                    self.events.write("child.died", level="error", name=proc.name, code=code)
                    return 1
        ui.console.print(f"\n{self._signal} received; stopping her-os…")
        self.events.write("supervisor.stop_requested", signal=self._signal)
        return 0

    def _shutdown(self) -> None:
        """Services first (they use the stores), then FalkorDB, then PostgreSQL."""
        groups: list[tuple[list[str], float, tuple[signal.Signals, ...]]] = [
            (
                [dashboard.NAME, *(s.name for s in reversed(SERVICES))],
                self.settings.stop_timeout_s,
                (),
            ),
            ([falkordb.NAME], _FALKORDB_STOP_S, ()),
            ([postgres.NAME], _POSTGRES_STOP_S, (signal.SIGQUIT,)),  # SIGQUIT: immediate
        ]
        for names, timeout, escalate in groups:
            procs = [self._procs[n] for n in names if n in self._procs]
            if not procs:
                continue
            started = time.monotonic()
            with ui.console.status(f"Stopping {', '.join(p.name for p in procs)}…"):
                stop_together(procs, timeout, escalate, self._on_escalate)
            for proc in procs:
                self.events.write("child.stopped", name=proc.name, code=proc.exit_code())
                ui.ok(f"{proc.name} stopped ({time.monotonic() - started:.1f} s)")

    def _on_escalate(self, proc: ManagedProcess, sig: signal.Signals) -> None:
        ui.note(f"{proc.name} did not stop in time; sending {sig.name}")
        self.events.write("child.escalate", level="warning", name=proc.name, signal=sig.name)

    # -- components ----------------------------------------------------------------------

    def _spawn(
        self,
        name: str,
        argv: list[str],
        port: int,
        *,
        stop_signal: signal.Signals = signal.SIGTERM,
        env: dict[str, str] | None = None,
        run_as: RunAs | None = None,
    ) -> ManagedProcess:
        if self._stop.is_set():
            raise StopRequested
        proc = ManagedProcess(
            name,
            argv,
            self.layout.log_file(name),
            stop_signal=stop_signal,
            env=env,
            cwd=self.layout.root,
            run_as=run_as,
        )
        self._procs[name] = proc
        self.state.components[name] = Component(name, proc.ref, port)
        self._save_state()
        self.events.write("child.started", name=name, pid=proc.pid, port=port)
        return proc

    def _await(self, proc: ManagedProcess, what: str, probe: Callable[[], Probe]) -> None:
        started = time.monotonic()
        try:
            with ui.console.status(f"Waiting for {what}…"):
                wait_until(
                    what,
                    probe,
                    timeout=self.settings.start_timeout_s,
                    stop=self._stop,
                    exited=proc.exit_code,
                )
        except StartupError as exc:
            ui.fail(str(exc), tail_text(proc.log_path), proc.log_path)
            raise
        ui.ok(f"{what} ready ({time.monotonic() - started:.1f} s)")

    def _start_postgres(self) -> None:
        s, layout = self.settings, self.layout
        try:
            run_as = postgres.system_account(s)
            for message in postgres.prepare_filesystem(layout, run_as):
                ui.note(message)
            if not postgres.is_initialized(layout):
                with ui.console.status("Initializing PostgreSQL (initdb)…"):
                    postgres.initdb(layout, s, self.creds, run_as)
                ui.ok(f"PostgreSQL cluster created in {layout.postgres}")
                self.events.write("postgres.initdb", pgdata=str(layout.postgres))
            stale = postgres.clear_stale_pidfile(layout)
        except StartupError as exc:
            ui.fail(str(exc), exc.log_tail)
            raise
        if stale:
            ui.note(stale)
        if run_as is not None:
            ui.note(f"PostgreSQL runs as system user {run_as.name!r} (it refuses root)")
        proc = self._spawn(
            postgres.NAME,
            postgres.server_argv(layout, s),
            s.postgres_port,
            stop_signal=signal.SIGINT,  # fast shutdown
            run_as=run_as,
        )
        host, port, user = s.connect_host, s.postgres_port, s.postgres_user
        self._await(proc, f"PostgreSQL on {host}:{port}", lambda: postgres.probe(host, port, user))
        try:
            if postgres.ensure_database(s, self.creds):
                ui.ok(f"database {s.postgres_db!r} created")
        except StartupError as exc:
            ui.fail(str(exc), tail_text(proc.log_path), proc.log_path)
            raise

    def _start_falkordb(self) -> None:
        s = self.settings
        config = falkordb.write_config(self.layout, s, self.creds.falkordb_password)
        proc = self._spawn(falkordb.NAME, falkordb.server_argv(config), s.falkordb_port)
        host, port, pw = s.connect_host, s.falkordb_port, self.creds.falkordb_password
        self._await(proc, f"FalkorDB on {host}:{port}", lambda: falkordb.probe(host, port, pw))

    def _start_services(self) -> None:
        # Start all three at once (each takes seconds to import), then wait for each.
        started: list[tuple[Service, ManagedProcess]] = []
        for service in SERVICES:
            env = service_env(service, self.settings, self.layout, self.creds)
            port = service.port(self.settings)
            started.append((service, self._spawn(service.name, service.argv(), port, env=env)))
        for service, proc in started:
            url = service.base_url(self.settings.connect_host, service.port(self.settings))
            self._await(proc, f"{service.name} on {url}", lambda u=url: http_health(u + "/health"))

    def _start_dashboard(self) -> None:
        """The Aquarium, when it can be served; the platform runs without it otherwise."""
        s = self.settings
        try:
            if not s.dashboard:
                raise dashboard.NotServable("turned off (--no-dashboard or HER_OS_DASHBOARD=false)")
            server = dashboard.locate(s.dashboard_dir)
        except dashboard.NotServable as exc:
            ui.note(f"Aquarium dashboard not served: {exc}")
            self.state.skipped[dashboard.NAME] = str(exc)
            self._save_state()
            self.events.write("dashboard.skipped", reason=str(exc))
            return
        engine = CONTEXT_ENGINE.base_url(s.connect_host, CONTEXT_ENGINE.port(s))
        proc = self._spawn(
            dashboard.NAME,
            server.argv(s.host, s.dashboard_port),
            s.dashboard_port,
            env=dashboard.server_env(engine),
        )
        page = dashboard.url(s, s.connect_host)
        self._await(proc, f"dashboard on {page}", lambda: dashboard.probe(page))

    # -- output --------------------------------------------------------------------------

    def _save_state(self) -> None:
        write_state(self.layout.state_file, self.state)

    def _print_ready(self) -> None:
        ports = {name: comp.port for name, comp in self.state.components.items()}
        ui.console.print()
        ui.print_endpoints(
            endpoints(self.settings, self.settings.connect_host, ports),
            self.creds.internal_token,
            self.layout.secrets,
        )
        ui.console.print(
            Text.assemble(f"Logs: {self.layout.logs}   ·   ", ("Press Ctrl-C to stop", "bold"))
        )


def up(settings: Settings) -> int:
    """The `her-os up` command. Returns its exit code."""
    layout = DataLayout(settings.resolved_data_dir)
    layout.create()
    lock = SupervisorLock(layout.lock_file)
    if not lock.acquire():
        _report_already_running(settings, layout)
        return 0
    try:
        try:
            for name in control.clear_stale(layout):
                ui.note(f"stopped {name} left over from an earlier run")
            check_ports(settings)
            creds = credentials.load_or_create(layout.secrets)
        except PortError as exc:
            ui.fail(str(exc))
            return 1
        except KeyboardInterrupt:  # before the supervisor's own handlers; nothing started
            return 130
        ui.console.print(f"Starting her-os (data in {layout.root})")
        return Supervisor(settings, layout, creds).run()
    finally:
        lock.release()


def _report_already_running(settings: Settings, layout: DataLayout) -> None:
    state = read_state(layout.state_file)
    if state is None or not state.supervisor.alive():  # the holder has not written it yet
        ui.console.print("her-os is already starting for this data directory.")
        return
    ui.console.print(
        f"her-os is already running (supervisor pid {state.supervisor.pid}, "
        f"since {state.started_at}, {state.phase})."
    )
    ports: dict[str, Any] = {name: comp.port for name, comp in state.components.items()}
    creds = credentials.load(layout.secrets)
    token = creds.internal_token if creds else None
    ui.print_endpoints(endpoints(settings, state.connect_host, ports), token, layout.secrets)
