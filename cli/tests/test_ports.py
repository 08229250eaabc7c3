from __future__ import annotations

import socket

import pytest

from her_os.config import Settings
from her_os.ports import PortError, check_ports, port_is_free


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def _settings(tmp_path, ports: list[int], **extra) -> Settings:
    names = ["postgres_port", "falkordb_port", "audio_port", "context_port", "annie_port"]
    names.append("dashboard_port")
    return Settings(data_dir=tmp_path, **dict(zip(names, ports, strict=True)), **extra)


def test_free_ports_pass(tmp_path):
    check_ports(_settings(tmp_path, _free_ports(6)))


def test_port_in_use_names_port_option_and_env(tmp_path):
    ports = _free_ports(6)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", ports[3]))
        busy.listen()
        assert not port_is_free("127.0.0.1", ports[3])
        with pytest.raises(PortError) as info:
            check_ports(_settings(tmp_path, ports))
    message = str(info.value)
    assert f"port {ports[3]}" in message
    assert "context-engine" in message
    assert "--context-port" in message
    assert "HER_OS_CONTEXT_PORT" in message


def test_same_port_twice_is_rejected(tmp_path):
    ports = _free_ports(6)
    ports[4] = ports[2]
    with pytest.raises(PortError, match="both audio-pipeline and annie-voice"):
        check_ports(_settings(tmp_path, ports))


def test_dashboard_port_is_checked_only_when_it_is_served(tmp_path):
    ports = _free_ports(6)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", ports[5]))
        busy.listen()
        with pytest.raises(PortError, match=r"dashboard.*--dashboard-port.*HER_OS_DASHBOARD_PORT"):
            check_ports(_settings(tmp_path, ports))
        check_ports(_settings(tmp_path, ports, dashboard=False))
