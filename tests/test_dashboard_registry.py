"""The dashboard's generated creature files must match the Python registry."""

from __future__ import annotations

import json

from scripts_harness import load_script

from her_os_shared.creatures import CREATURES, CreatureName, Origin, Zone

exporter = load_script("export_creatures")


def test_generated_json_is_up_to_date(capsys):
    assert exporter.main(["--check"]) == 0, capsys.readouterr().out


def test_generated_json_equals_registry():
    records = json.loads(exporter.DEFAULT_OUTPUT.read_text(encoding="utf-8"))
    by_name = {r["name"]: r for r in records}
    assert len(by_name) == len(records), "duplicate creature names"
    assert by_name.keys() == CREATURES.keys()
    for name, c in CREATURES.items():
        assert by_name[name] == {
            "name": c.name,
            "zone": c.zone.value,
            "service": c.service.value,
            "process": c.process,
            "origin": c.origin.value,
            "description": c.description,
        }


def test_the_designs_27_and_the_projects_own_in_three_zones():
    records = json.loads(exporter.DEFAULT_OUTPUT.read_text(encoding="utf-8"))
    assert len(records) == len(CREATURES)
    assert sum(r["origin"] == Origin.DESIGN for r in records) == 27
    assert {r["origin"] for r in records} == {o.value for o in Origin}
    assert {r["zone"] for r in records} == {z.value for z in Zone}
    assert len(Zone) == 3


def test_generated_names_are_the_enum():
    names = exporter.DEFAULT_OUTPUT.with_name(exporter.NAMES_FILE).read_text(encoding="utf-8")
    for member in CreatureName:
        assert f"  {member.name}: '{member.value}',\n" in names
    assert names.count("',\n") == len(CreatureName)


def test_order_is_zone_flow_then_name():
    records = exporter.creature_records()
    zone_rank = {z.value: i for i, z in enumerate(Zone)}
    keys = [(zone_rank[r["zone"]], r["name"]) for r in records]
    assert keys == sorted(keys)


def test_check_reports_a_stale_file(tmp_path, capsys):
    stale = tmp_path / "creatures.generated.json"
    missing, *rest = exporter.creature_records()
    stale.write_text(json.dumps(rest, indent=2) + "\n", encoding="utf-8")
    assert exporter.main(["--check", "--output", str(stale)]) == 1
    assert f'+    "name": "{missing["name"]}"' in capsys.readouterr().out
    assert exporter.main(["--check", "--output", str(tmp_path / "missing.json")]) == 1


def test_write_then_check_round_trips(tmp_path):
    out = tmp_path / "creatures.generated.json"
    assert exporter.main(["--output", str(out)]) == 0
    assert exporter.main(["--check", "--output", str(out)]) == 0
