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
