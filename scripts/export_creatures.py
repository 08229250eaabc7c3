"""Export the creature registry to the Aquarium dashboard as JSON.

The registry lives in Python (``her_os_shared.creatures``); the dashboard reads
``dashboard/src/creatures.generated.json`` so it never keeps a hand-written copy.

    uv run python scripts/export_creatures.py          # rewrite the JSON
    uv run python scripts/export_creatures.py --check  # exit 1 if it is out of date
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path

from her_os_shared.creatures import CREATURES, Zone

DEFAULT_OUTPUT = (
    Path(__file__).resolve().parents[1] / "dashboard" / "src" / "creatures.generated.json"
)

# Zones in the order a memory flows through them, then names: stable under reordering
# of the registry source, so the generated file only changes when the data does.
_ZONE_ORDER = {zone: i for i, zone in enumerate(Zone)}


def creature_records() -> list[dict[str, str]]:
    """The registry as plain records, sorted by zone (flow order), then name."""
    ordered = sorted(CREATURES.values(), key=lambda c: (_ZONE_ORDER[c.zone], c.name))
    return [
        {
            "name": c.name,
            "zone": str(c.zone),
            "service": str(c.service),
            "process": c.process,
            "description": c.description,
        }
        for c in ordered
    ]


def render() -> str:
    return json.dumps(creature_records(), indent=2, ensure_ascii=False) + "\n"


def diff(path: Path) -> list[str]:
    """Unified diff from the file on disk to what it should be; empty when up to date."""
    current = path.read_text(encoding="utf-8") if path.exists() else ""
    return list(
        difflib.unified_diff(
            current.splitlines(keepends=True),
            render().splitlines(keepends=True),
            fromfile=f"{path} (on disk)",
            tofile=f"{path} (from registry)",
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is out of date")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="JSON file to write")
    args = parser.parse_args(argv)

    if args.check:
        changes = diff(args.output)
        if changes:
            sys.stdout.writelines(changes)
            print(
                f"\n{args.output} is out of date; run: uv run python scripts/export_creatures.py",
                file=sys.stderr,
            )
            return 1
        print(f"{args.output} is up to date ({len(CREATURES)} creatures)")
        return 0

    args.output.write_text(render(), encoding="utf-8")
    print(f"wrote {args.output} ({len(CREATURES)} creatures)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
