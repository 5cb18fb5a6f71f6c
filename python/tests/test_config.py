"""The interface takes its options from python-can's configuration sources
(environment and config file) as well as from keyword arguments."""

import json

import can
import pytest


def echo_round_trip(bus):
    """Send one frame and return what comes back on the same bus."""
    bus.send(can.Message(arbitration_id=0x5A, data=[1, 2], is_extended_id=False))
    return bus.recv(5)


def test_bus_opens_from_python_cans_environment_variables(fieldhub_hub, monkeypatch):
    monkeypatch.setenv("CAN_INTERFACE", "fieldhub")
    monkeypatch.setenv("CAN_CHANNEL", "can1")
    monkeypatch.setenv("CAN_CONFIG", json.dumps({"hub": fieldhub_hub.url, "receive_own_messages": "true",
                                                 "port_name": "from-env"}))
    with can.Bus() as bus:
        echo = echo_round_trip(bus)
        assert echo.channel == "can1" and not echo.is_rx and echo.data == bytearray([1, 2])
        assert fieldhub_hub.port("from-env")["channel"] == "can1"


def test_bus_opens_from_a_python_can_config_file_section(fieldhub_hub, monkeypatch, tmp_path):
    (tmp_path / "can.conf").write_text(
        "[default]\ninterface = fieldhub\nchannel = can0\n"
        f"[tester]\ninterface = fieldhub\nchannel = can1\nhub = {fieldhub_hub.url}\n"
        "receive_own_messages = False\nblock_on_overflow = yes\ntimeout = 2.5\n"
    )
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("CAN_INTERFACE", "CAN_CHANNEL", "CAN_CONFIG", "CAN_INTERFACE_tester", "CAN_CONFIG_tester"):
        monkeypatch.delenv(name, raising=False)
    with can.Bus(config_context="tester") as bus, fieldhub_hub.bus("can1") as peer:
        assert bus.channel_info == f"fieldhub {fieldhub_hub.url} can1"
        peer.send(can.Message(arbitration_id=0x77, is_extended_id=False))
        assert bus.recv(5).arbitration_id == 0x77
        # "False" from the file means false: no echo of its own frame.
        bus.send(can.Message(arbitration_id=0x78, is_extended_id=False))
        assert peer.recv(5).arbitration_id == 0x78
        assert bus.recv(0.2) is None


def test_a_malformed_option_from_a_config_source_names_the_option(fieldhub_hub):
    with pytest.raises(can.CanInitializationError, match="receive_own_messages = 'sometimes': expected true or false"):
        can.Bus(interface="fieldhub", channel="can0", hub=fieldhub_hub.url, receive_own_messages="sometimes")
    with pytest.raises(can.CanInitializationError, match="timeout = 'soon': expected a number of seconds"):
        can.Bus(interface="fieldhub", channel="can0", hub=fieldhub_hub.url, timeout="soon")
