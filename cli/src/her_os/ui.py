"""Rich output for humans. Machine-readable output (`status --json`) does not come here."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from her_os.status import Endpoint

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)


def ok(message: str) -> None:
    console.print(Text.assemble(("✓ ", "green"), message))


def note(message: str) -> None:
    console.print(Text(message, style="dim"))


def fail(message: str, log_tail: str = "", log_path: Path | None = None) -> None:
    err_console.print(Text.assemble(("✗ ", "bold red"), message))
    if log_tail:
        title = f"last lines of {log_path}" if log_path else "log"
        err_console.print(
            Panel(Text(log_tail), title=title, title_align="left", border_style="red")
        )


def print_endpoints(endpoints: Sequence[Endpoint], token: str | None, secrets_dir: Path) -> None:
    """Two narrow columns (so a plain 80-column pipe never cuts a URL), then the token on a
    line of its own, easy to copy."""
    table = Table(title="her-os", title_justify="left")
    table.add_column("component", style="bold", no_wrap=True)
    table.add_column("url", overflow="fold")
    for endpoint in endpoints:
        table.add_row(endpoint.name, endpoint.url)
        if endpoint.docs:
            table.add_row(Text("  API docs", "dim"), endpoint.docs)
    console.print(table)
    for endpoint in endpoints:
        if endpoint.note:
            note = endpoint.note.replace("secrets/", f"{secrets_dir}/")
            console.print(Text(f"{endpoint.name} {note}", "dim"), soft_wrap=True)
    if token is not None:
        console.print(
            Text.assemble(("Internal token", "bold"), " (header X-Internal-Token): ", token),
            soft_wrap=True,
        )


def status_table(report: dict[str, Any]) -> Table:
    table = Table(title=f"her-os ({report['phase']})", title_justify="left")
    for column in ("component", "pid", "port", "health", "detail"):
        table.add_column(column)
    for comp in report["components"].values():
        health = Text("healthy", "green") if comp["healthy"] else Text("unhealthy", "red")
        if not comp["alive"]:
            health = Text("down", "red")
        pid = str(comp["pid"]) if comp["pid"] is not None else "-"
        table.add_row(comp["name"], pid, str(comp["port"]), health, comp["detail"])
    return table


def drift_table(report: dict[str, Any], repairs: dict[str, str], title: str) -> Table:
    """One row per kind of drift: count, sessions, a few ids, and what a repair does."""
    table = Table(title=title, title_justify="left")
    for column in ("drift", "count", "sessions", "sample", "repair"):
        table.add_column(column, overflow="fold")
    for kind, drift in report["drift"].items():
        count = Text(str(drift["count"]), "red" if drift["count"] else "green")
        sample = ", ".join(drift["sample"][:3]) + (" …" if len(drift["sample"]) > 3 else "")
        table.add_row(kind, count, str(drift["sessions"]), sample, repairs.get(kind, ""))
    return table


def check_summary(report: dict[str, Any]) -> None:
    """What was compared, what was not checked, and what is still in flight."""
    counts = report["counts"]
    if counts:
        note("compared: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    for store, why in report["skipped"].items():
        note(f"{store} not checked: {why}")
    if report["pending"]:
        note("still queued: " + ", ".join(f"{k} {v}" for k, v in report["pending"].items()))
    if report["forgetting"]:
        note(f"{report['forgetting']} sessions of unfinished forget requests left out")
