"""The `her-os` command line. Commands are thin: the work is in the modules they call."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import psutil
import typer
from pydantic import ValidationError

from her_os import backup as backups
from her_os import check as checks
from her_os import control, memory_mcp, supervisor, ui
from her_os.config import PORT_SETTINGS, Settings, load_settings
from her_os.logs import follow, log_names, tail_lines
from her_os.paths import DataLayout
from her_os.state import live_state
from her_os.status import collect

app = typer.Typer(
    name="her-os",
    help="Run her-os on its embedded defaults: PostgreSQL, FalkorDB and the three services; "
    "back up, restore and rebuild its data.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,  # locals would include secrets
)

DataDir = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        help="Data directory (env HER_OS_DATA_DIR; default ./data).",
        show_default=False,
    ),
]


def _port(field: str) -> Any:
    """The option of one port, documented from the settings (one source of truth)."""
    spec = next(spec for spec in PORT_SETTINGS if spec.field == field)
    default = Settings.model_fields[field].default
    return typer.Option(
        spec.option,
        help=f"Port of {spec.component} (env {spec.env}; default {default}).",
        show_default=False,
    )


def _settings(**overrides: Any) -> Settings:
    try:
        return load_settings(**overrides)
    except ValidationError as exc:
        for error in exc.errors():
            field = ".".join(str(part) for part in error["loc"])
            ui.fail(f"invalid setting {field} (HER_OS_{field.upper()}): {error['msg']}")
        raise typer.Exit(2) from None


@app.command()
def up(
    data_dir: DataDir = None,
    host: Annotated[
        str | None,
        typer.Option(
            help="Address to bind (env HER_OS_HOST; default 127.0.0.1).", show_default=False
        ),
    ] = None,
    postgres_port: Annotated[int | None, _port("postgres_port")] = None,
    falkordb_port: Annotated[int | None, _port("falkordb_port")] = None,
    audio_port: Annotated[int | None, _port("audio_port")] = None,
    context_port: Annotated[int | None, _port("context_port")] = None,
    annie_port: Annotated[int | None, _port("annie_port")] = None,
    dashboard_port: Annotated[int | None, _port("dashboard_port")] = None,
    dashboard: Annotated[
        bool | None,
        typer.Option(
            "--dashboard/--no-dashboard",
            help="Serve the Aquarium dashboard (env HER_OS_DASHBOARD; default: yes, when "
            "dashboard/dist is built and Node.js is installed).",
            show_default=False,
        ),
    ] = None,
    start_timeout: Annotated[
        float | None,
        typer.Option(
            help="Seconds each component may take to become healthy "
            "(env HER_OS_START_TIMEOUT_S; default 90).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Start the platform in the foreground; Ctrl-C stops it."""
    settings = _settings(
        data_dir=data_dir,
        host=host,
        postgres_port=postgres_port,
        falkordb_port=falkordb_port,
        audio_port=audio_port,
        context_port=context_port,
        annie_port=annie_port,
        dashboard_port=dashboard_port,
        dashboard=dashboard,
        start_timeout_s=start_timeout,
    )
    raise typer.Exit(supervisor.up(settings))


@app.command()
def down(data_dir: DataDir = None) -> None:
    """Stop a running `her-os up` and wait until everything has exited."""
    settings = _settings(data_dir=data_dir)
    layout = DataLayout(settings.resolved_data_dir)
    state = live_state(layout.state_file)
    try:
        with ui.console.status(
            f"Stopping her-os (supervisor pid {state.supervisor.pid})…" if state else "Checking…"
        ):
            was_running, killed = control.down(layout, settings.down_timeout_s)
    except psutil.AccessDenied as exc:
        ui.fail(f"not allowed to signal the supervisor (pid {exc.pid}): run as its user")
        raise typer.Exit(1) from None
    if not was_running:
        ui.console.print("her-os is not running.")
        return
    if killed:
        ui.fail(
            f"the supervisor did not stop within {settings.down_timeout_s:.0f} s; "
            f"killed it and {', '.join(killed)}"
        )
        raise typer.Exit(1)
    ui.ok("her-os stopped")


@app.command()
def status(
    data_dir: DataDir = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Show each component's process and health. Exit code 0 only when all are healthy."""
    report = collect(_settings(data_dir=data_dir))
    if as_json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    elif not report["running"]:
        ui.console.print(f"her-os is not running (data dir {report['data_dir']}).")
    else:
        ui.console.print(ui.status_table(report))
    raise typer.Exit(0 if report["healthy"] else 1)


@app.command()
def logs(
    name: Annotated[
        str | None, typer.Argument(help="Log to show (postgres, context-engine…); all if omitted.")
    ] = None,
    follow_: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new lines.")
    ] = False,
    lines: Annotated[int, typer.Option("--lines", "-n", help="Lines to show per log.")] = 50,
    data_dir: DataDir = None,
) -> None:
    """Show the end of data/logs/<name>.log (every log when no name is given)."""
    layout = DataLayout(_settings(data_dir=data_dir).resolved_data_dir)
    available = log_names(layout.logs)
    if name is not None and name not in available:
        known = ", ".join(available) or "none yet"
        ui.fail(f"no log named {name!r} in {layout.logs} (available: {known})")
        raise typer.Exit(1)
    names = [name] if name is not None else available
    out = sys.stdout
    for index, log in enumerate(names):
        if name is None:
            out.write(("\n" if index else "") + f"==> {layout.log_file(log)} <==\n")
        for line in tail_lines(layout.log_file(log), lines):
            out.write(line + "\n")
    out.flush()
    if not follow_:
        return
    prefix = name is None and len(names) > 1
    try:
        for log, line in follow({n: layout.log_file(n) for n in names}):
            out.write((f"{log} | " if prefix else "") + line + "\n")
            out.flush()
    except KeyboardInterrupt:
        pass


def _layout(data_dir: Path | None) -> DataLayout:
    return DataLayout(_settings(data_dir=data_dir).resolved_data_dir)


def _data_command(action: Callable[[], backups.Result], verb: str) -> backups.Result:
    """Run a backup, restore or rebuild: its refusal as a message and exit 1, else a summary."""
    try:
        result = action()
    except backups.BackupError as exc:
        ui.fail(str(exc))
        raise typer.Exit(1) from None
    for name, size in result.components.items():
        ui.note(f"  {name}: {size['files']} files, {size['bytes'] / 1e6:.1f} MB {verb}")
    return result


@app.command()
def backup(
    data_dir: DataDir = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Archive to write (default: <data dir>/backups/her-os-<UTC time>.tar.gz).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Snapshot PostgreSQL, FalkorDB, the vectors, the JSONL files, the enrollment bank and
    the secrets into one archive (mode 0600). Running or stopped: a running platform is
    backed up live, without its vector index (embedded again after a restore)."""
    settings = _settings(data_dir=data_dir)
    layout = DataLayout(settings.resolved_data_dir)
    result = _data_command(lambda: backups.backup(layout, output, settings.postgres_user), "saved")
    if result.live:
        ui.note("taken live: the vector index is left out; after a restore it is embedded again")
    ui.ok(f"backup written to {result.path}")


@app.command()
def restore(
    archive: Annotated[Path, typer.Argument(help="A backup written by `her-os backup`.")],
    data_dir: DataDir = None,
) -> None:
    """Put a backup back into the data directory (the platform must be stopped). What it
    replaces is moved aside to <data dir>/pre-restore-<time>/, never deleted."""
    result = _data_command(lambda: backups.restore(_layout(data_dir), archive), "restored")
    if result.path.exists():
        ui.note(f"the data it replaced is in {result.path}")
    ui.ok(f"restored from {archive}; start with `her-os up`")


@app.command()
def rebuild(
    data_dir: DataDir = None,
    yes: Annotated[
        bool, typer.Option("--yes", help="Do it (without it, only say what would happen).")
    ] = False,
) -> None:
    """Re-derive PostgreSQL, the knowledge graph, the vectors and the keyword index from the
    JSONL transcripts: moves those stores aside (to <data dir>/pre-rebuild-<time>/); the next
    `her-os up` ingests every transcript again. The platform must be stopped."""
    layout = _layout(data_dir)
    if not yes:
        ui.console.print(
            f"Would move {', '.join(backups.DERIVED)} of {layout.root} aside and let the next "
            "`her-os up` re-derive them from the transcripts. Run again with --yes."
        )
        raise typer.Exit(1)
    result = _data_command(lambda: backups.rebuild(layout), "moved aside")
    ui.ok(f"derived stores moved to {result.path}; `her-os up` rebuilds them from the transcripts")


@app.command()
def check(
    data_dir: DataDir = None,
    repair: Annotated[
        bool, typer.Option("--repair", help="Repair the drift, then check again.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    url: Annotated[
        str | None,
        typer.Option(
            help="The context engine's URL (default: the one `her-os up` runs).",
            show_default=False,
        ),
    ] = None,
    wait: Annotated[
        float,
        typer.Option(help="After --repair: seconds to wait for the jobs it queued."),
    ] = 300.0,
) -> None:
    """Compare the JSONL transcripts with PostgreSQL, the vectors and the graph episodes.
    Exit code 0 only when no drift remains; rows PostgreSQL has without a JSONL line are
    reported, never deleted."""
    layout = _layout(data_dir)
    try:
        target = checks.find_engine(layout, url, os.environ.get("HER_OS_INTERNAL_TOKEN"))
        checker = checks.Checker(target)
        try:
            if as_json:
                result = checker.run(repair=repair, progress=lambda _m: None, wait_s=wait)
            else:
                with ui.console.status("Checking the stores…") as spinner:
                    result = checker.run(
                        repair=repair,
                        progress=lambda m: spinner.update(m),
                        wait_s=wait,
                    )
        finally:
            checker.close()
    except checks.CheckError as exc:
        ui.fail(str(exc))
        raise typer.Exit(2) from None
    final = checks.final_report(result)
    if as_json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        if repair:
            ui.console.print(ui.drift_table(result["before"], checks.REPAIRS, "drift found"))
            done = {k: v for k, v in result["repaired"].items() if v}
            ui.note("repaired: " + (", ".join(f"{k} {v}" for k, v in done.items()) or "nothing"))
        ui.console.print(
            ui.drift_table(final, checks.REPAIRS, "drift after repair" if repair else "drift")
        )
        ui.check_summary(final)
        if final["drift_total"]:
            ui.fail(f"{final['drift_total']} drifted between the stores")
        else:
            ui.ok("the stores agree with the JSONL transcripts")
    raise typer.Exit(1 if final["drift_total"] else 0)


@app.command(name="mcp")
def mcp_stdio(
    data_dir: DataDir = None,
    url: Annotated[
        str | None,
        typer.Option(
            help=f"The context engine's URL (env {memory_mcp.URL_ENV}; default: the running "
            "platform's, else the configured host and context port).",
            show_default=False,
        ),
    ] = None,
    token_file: Annotated[
        Path | None,
        typer.Option(
            help=f"A file holding the engine's token (env {memory_mcp.TOKEN_ENV} holds the "
            "token itself; default: <data dir>/secrets/internal_token).",
            show_default=False,
        ),
    ] = None,
    read_only: Annotated[
        bool,
        typer.Option(
            "--read-only",
            envvar="HER_OS_MCP_READ_ONLY",
            help="Offer only the reading tools (no add_memory, delete_*, forget_person).",
        ),
    ] = False,
) -> None:
    """Serve the memory to an MCP client over stdio (Claude Desktop, Cursor): search, facts,
    profiles, add, forget (docs/mcp.md). Talks to a running context engine; stdout carries
    the protocol only, messages go to stderr."""
    try:
        target = memory_mcp.find_target(_settings(data_dir=data_dir), url, token_file)
        memory_mcp.serve(target, read_only=read_only)
    except memory_mcp.McpSetupError as exc:
        ui.fail(f"her-os mcp: {exc}")
        raise typer.Exit(2) from None


if __name__ == "__main__":
    app()
