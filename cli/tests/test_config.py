from __future__ import annotations

from pathlib import Path

from her_os.config import PORT_SETTINGS, load_settings


def test_defaults(monkeypatch):
    for spec in PORT_SETTINGS:
        monkeypatch.delenv(spec.env, raising=False)
    monkeypatch.delenv("HER_OS_DATA_DIR", raising=False)
    settings = load_settings()
    assert settings.data_dir == Path("data")
    assert (settings.postgres_port, settings.falkordb_port) == (55432, 56379)
    assert (settings.audio_port, settings.context_port, settings.annie_port) == (9100, 8100, 7860)
    assert settings.dashboard and settings.dashboard_port == 5174
    assert settings.dashboard_dir is None
    assert settings.host == settings.connect_host == "127.0.0.1"


def test_env_then_options(monkeypatch, tmp_path):
    monkeypatch.setenv("HER_OS_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("HER_OS_CONTEXT_PORT", "18100")
    monkeypatch.setenv("HER_OS_ANNIE_PORT", "17860")
    settings = load_settings(annie_port=27860, audio_port=None)
    assert settings.resolved_data_dir == tmp_path.resolve()
    assert settings.context_port == 18100  # from the environment
    assert settings.annie_port == 27860  # an option wins
    assert settings.audio_port == 9100  # None means "not given"


def test_every_port_has_an_env_var_and_option():
    assert {spec.env for spec in PORT_SETTINGS} == {
        "HER_OS_POSTGRES_PORT",
        "HER_OS_FALKORDB_PORT",
        "HER_OS_AUDIO_PORT",
        "HER_OS_CONTEXT_PORT",
        "HER_OS_ANNIE_PORT",
        "HER_OS_DASHBOARD_PORT",
    }
    assert {spec.option for spec in PORT_SETTINGS} == {
        "--postgres-port",
        "--falkordb-port",
        "--audio-port",
        "--context-port",
        "--annie-port",
        "--dashboard-port",
    }


def test_wildcard_host_is_reached_on_loopback():
    assert load_settings(host="0.0.0.0").connect_host == "127.0.0.1"
