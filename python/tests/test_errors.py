"""Failures raise python-can errors with the hub's explanation, never hang."""

import os
import signal
import subprocess
import sys
import textwrap

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


def test_hub_killed_mid_session_is_an_operation_error():
    hub = fieldhub.Hub()
    bus = hub.bus("can0")
    os.kill(hub.pid, signal.SIGKILL)
    with pytest.raises(can.CanOperationError, match="connection to the hub is closed"):
        bus.recv(30)
    with pytest.raises(can.CanOperationError, match="connection to the hub is closed"):
        bus.send(can.Message(arbitration_id=1))
    bus.shutdown()
    hub.stop()


def test_private_hub_stops_when_the_process_that_started_it_is_killed():
    owner = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(
            """
            import time, fieldhub
            hub = fieldhub.Hub()
            print(hub.url, flush=True)
            time.sleep(120)
            """
        )],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        url = owner.stdout.readline().strip()
        assert url.startswith("tcp://"), "the owner did not start its hub"
        bus = can.Bus(interface="fieldhub", channel="can0", hub=url)
        owner.kill()
        owner.wait(30)
        # The hub noticed its owner's end and shut down: the bus sees it go.
        with pytest.raises(can.CanOperationError, match="connection to the hub is closed"):
            bus.recv(30)
        bus.shutdown()
    finally:
        owner.kill()
        owner.wait(30)


def test_bad_hub_configuration_raises_with_the_line_and_field():
    with pytest.raises(fieldhub.HubStartError, match=r"Hub\(config\): line 3: .*canfdx") as info:
        fieldhub.Hub('[[channel]]\nname = "fd0"\nprotocol = "canfdx"\n')
    assert isinstance(info.value, can.CanInitializationError)


def test_send_on_a_held_bus_times_out_and_loses_nothing_it_accepted(fieldhub_hub):
    sender = fieldhub_hub.bus("can0")
    # Opened and never read while the sender fills the bus: it holds the channel.
    holder = fieldhub_hub.bus("can0", block_on_overflow=True)
    accepted = 0
    with pytest.raises(can.CanOperationError, match="could not be queued within 0.05 s"):
        while accepted < 5_000_000:  # hang guard; the bus is held long before
            sender.send(can.Message(arbitration_id=0x100, data=accepted.to_bytes(4, "little"),
                                    is_extended_id=False), timeout=0.05)
            accepted += 1
    got = []
    while len(got) < accepted:
        m = holder.recv(30)
        assert m is not None, f"stalled after {len(got)} of {accepted}"
        got.append(int.from_bytes(m.data, "little"))
    assert got == list(range(accepted))
    assert holder.recv(0.3) is None


def test_a_frame_sent_to_a_bus_off_controller_raises_operation_error_naming_bus_off(fieldhub_hub):
    bus = fieldhub_hub.bus("can0")
    try:
        fieldhub_hub.short("can0")
        bus.send(can.Message(arbitration_id=0x123, data=[1], is_extended_id=False))
        with pytest.raises(can.CanOperationError, match="bus-off"):
            bus.flush_tx_buffer()
        stats = fieldhub_hub.stats()
        can0 = next(c for c in stats["channels"] if c["name"] == "can0")
        assert can0["tx_dropped_by_reason"] == {"bus_off": 1}
    finally:
        fieldhub_hub.unshort("can0")
        bus.shutdown()


def test_a_frame_a_fault_rule_drops_raises_on_flush_and_the_others_reach_the_bus(fieldhub_hub):
    tx, rx = fieldhub_hub.bus("can0"), fieldhub_hub.bus("can0")
    rule = fieldhub_hub.add_fault(channel="can0", at="sender", id=0x66, mask=0x7FF, action={"type": "drop"})
    try:
        tx.send(can.Message(arbitration_id=0x66, data=[1], is_extended_id=False))
        with pytest.raises(can.CanOperationError, match="dropped by a fault rule"):
            tx.flush_tx_buffer()
        tx.send(can.Message(arbitration_id=0x67, data=[2], is_extended_id=False))
        tx.flush_tx_buffer()
        got = rx.recv(5)
        assert got is not None and got.arbitration_id == 0x67, "only the frame the rule spared is on the bus"
    finally:
        fieldhub_hub.remove_fault(rule["id"])
        tx.shutdown()
        rx.shutdown()


def test_send_after_shutdown_says_the_bus_has_been_shut_down(fieldhub_hub):
    bus = fieldhub_hub.bus("can0")
    bus.shutdown()
    with pytest.raises(can.CanOperationError, match="the bus has been shut down"):
        bus.send(can.Message(arbitration_id=1))


def test_an_ipv4_address_out_of_range_is_an_invalid_url():
    with pytest.raises(can.CanInitializationError, match="invalid hub URL .*'256.1.1.1' is not an IPv4 address"):
        can.Bus(interface="fieldhub", channel="can0", hub="tcp://256.1.1.1:5")
