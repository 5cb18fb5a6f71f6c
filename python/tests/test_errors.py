"""Failures raise python-can errors with the hub's explanation, never hang."""

import can
import pytest

import fieldhub


def test_missing_hub_is_an_initialization_error():
    with pytest.raises(can.CanInitializationError, match="cannot reach the hub at tcp://127.0.0.1:1"):
        can.Bus(interface="fieldhub", channel="can0", hub="tcp://127.0.0.1:1")


def test_unknown_channel_names_the_channels_there_are(fieldhub_hub):
    with pytest.raises(can.CanInitializationError, match="unknown channel 'can9'; this hub has: can0, can1"):
        fieldhub_hub.bus("can9")


def test_hub_dying_mid_session_is_an_operation_error():
    hub = fieldhub.Hub()
    bus = hub.bus("can0")
    hub.stop()
    with pytest.raises(can.CanOperationError, match="shutting down|closed"):
        bus.recv(10)
    with pytest.raises(can.CanOperationError):
        bus.send(can.Message(arbitration_id=1))
    bus.shutdown()


def test_control_errors_carry_the_hubs_message(fieldhub_hub):
    with pytest.raises(fieldhub.HubError, match="no open port named 'ghost'") as info:
        fieldhub_hub.unplug("ghost")
    assert info.value.status == 404
    assert issubclass(fieldhub.HubError, can.CanError)
