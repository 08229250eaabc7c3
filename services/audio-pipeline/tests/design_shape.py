"""One check for "our answer has the design's example's shape", shared by the audio pipeline's
design tests and the cross-service contract suite (tests/test_design_contract.py)."""

from __future__ import annotations

from typing import Any


def assert_shape(
    design: Any,
    ours: Any,
    where: str = "answer",
    nullable: frozenset[str] = frozenset(),
    free_form: frozenset[str] = frozenset(),
) -> None:
    """Every key of the design's example is in ours with a value of the same JSON type (an
    int where the design shows an int, a number where it shows a float); every item of our
    list has the shape of the example's first item. The design's null says nothing of the
    type; keys named in `nullable` may be null where the request asks for nothing there; keys
    named in `free_form` need only be objects."""
    key = where.rsplit(".", 1)[-1]
    if design is None or (ours is None and key in nullable):
        return
    if key in free_form:
        assert isinstance(ours, dict), f"{where}: expected an object, got {ours!r}"
        return
    if isinstance(design, dict):
        assert isinstance(ours, dict), f"{where}: expected an object, got {ours!r}"
        for name, value in design.items():
            assert name in ours, f"{where}: no {name!r} (has {sorted(ours)})"
            assert_shape(value, ours[name], f"{where}.{name}", nullable, free_form)
    elif isinstance(design, list):
        assert isinstance(ours, list), f"{where}: expected a list, got {ours!r}"
        for n, item in enumerate(ours if design else []):
            assert_shape(design[0], item, f"{where}[{n}]", nullable, free_form)
    elif isinstance(design, bool):
        assert isinstance(ours, bool), f"{where}: expected a boolean, got {ours!r}"
    elif isinstance(design, int):
        assert isinstance(ours, int) and not isinstance(ours, bool), f"{where}: {ours!r}"
    elif isinstance(design, float):
        assert isinstance(ours, int | float) and not isinstance(ours, bool), f"{where}: {ours!r}"
    else:
        assert isinstance(ours, type(design)), f"{where}: expected {type(design)}, got {ours!r}"
