"""No creature name is written as a string outside the registry (ADR 0021).

Emitters name creatures through `her_os_shared.creatures.CreatureName` (`CreatureName.OWL`),
the dashboard through `CREATURE` of its generated registry, so a creature is renamed, moved or
retired in one module and every stale use fails to import or to compile instead of sending
events the engine drops.

The rule, as this test applies it:
- scanned: the services' code (`services/*/src`: Python, JS, HTML), the CLI (`cli/src`), the
  benchmarks (`bench/`), the scripts (`scripts/`), and the dashboard's code (`dashboard/src`);
- a violation: a string literal that is a creature name (today's, or a name retired by ADR
  0021), or that holds one in quotes (`"WHERE creature = 'owl'"`);
- allowed: the registry module itself; the generated registry files (the dashboard's
  `creatures.generated.json` and `creature-names.generated.ts`); tests (`tests/`, the services'
  `tests/`, `*.test.ts`, `dashboard/src/testing/`), which may name creatures on purpose to pin
  the wire format a design-built client sends; docstrings and comments (prose, not values).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from her_os_shared.creatures import CREATURES, RETIRED_NAMES

ROOT = Path(__file__).resolve().parents[1]
REGISTRY = ROOT / "services/shared/src/her_os_shared/creatures.py"
GENERATED = {
    ROOT / "dashboard/src/creatures.generated.json",
    ROOT / "dashboard/src/creature-names.generated.ts",
}
NAMES = frozenset(CREATURES) | RETIRED_NAMES
_ALTERNATIVES = "|".join(sorted((re.escape(n) for n in NAMES), key=len, reverse=True))
# A name between matching quotes: 'owl', "owl", `owl`.
QUOTED = re.compile(rf"""(['"`])({_ALTERNATIVES})\1""")


def _python_files() -> Iterator[Path]:
    for base in [*sorted(ROOT.glob("services/*/src")), ROOT / "cli/src", ROOT / "bench",
                 ROOT / "scripts"]:  # fmt: skip
        for path in sorted(base.rglob("*.py")):
            if path != REGISTRY and "__pycache__" not in path.parts:
                yield path


def _web_files() -> Iterator[Path]:
    for base in sorted(ROOT.glob("services/*/src")):
        for ext in ("*.js", "*.html", "*.ts"):
            yield from sorted(base.rglob(ext))
    for path in sorted((ROOT / "dashboard/src").rglob("*.ts")):
        if path in GENERATED or path.name.endswith(".test.ts") or "testing" in path.parts:
            continue
        yield path


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def python_violations(path: Path, source: str, root: Path = ROOT) -> list[str]:
    tree = ast.parse(source, filename=str(path))
    skip = _docstrings(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
            continue
        if id(node) in skip:
            continue
        inner = QUOTED.search(node.value)
        if node.value in NAMES or inner:
            name = node.value if node.value in NAMES else inner.group(2)  # type: ignore[union-attr]
            found.append((node.lineno, f"{path.relative_to(root)}:{node.lineno}: {name!r}"))
    return [text for _, text in sorted(found)]


_LINE_COMMENT = re.compile(r"^\s*(//|\*|/\*)")


def web_violations(path: Path, source: str, root: Path = ROOT) -> list[str]:
    found = []
    for n, line in enumerate(source.splitlines(), 1):
        if _LINE_COMMENT.match(line):
            continue
        code = line.split(" // ", 1)[0]
        for m in QUOTED.finditer(code):
            found.append(f"{path.relative_to(root)}:{n}: {m.group(2)!r}")
    return found


def test_no_creature_name_is_a_string_outside_the_registry() -> None:
    found: list[str] = []
    for path in _python_files():
        found += python_violations(path, path.read_text(encoding="utf-8"))
    for path in _web_files():
        found += web_violations(path, path.read_text(encoding="utf-8"))
    assert not found, (
        "creature names written as strings (use her_os_shared.creatures.CreatureName, or the "
        "dashboard's CREATURE):\n" + "\n".join(found)
    )


def test_the_scan_finds_what_it_should(tmp_path: Path) -> None:
    src = (
        '"""A docstring naming `owl` is prose."""\n'
        'recorder.emit("owl", "start")\n'
        "sql = \"SELECT 1 WHERE creature = 'octopus'\"\n"
        'ok = "owlish hydra-core"\n'
    )
    assert python_violations(tmp_path / "emitter.py", src, tmp_path) == [
        "emitter.py:2: 'owl'",
        "emitter.py:3: 'octopus'",
    ]
    ts = "const a = 'luna-moth';\n// 'owl' in a comment\nconst b = `sea-cucumber`; // 'kelpie'\n"
    assert web_violations(tmp_path / "x.ts", ts, tmp_path) == [
        "x.ts:1: 'luna-moth'",
        "x.ts:3: 'sea-cucumber'",
    ]
