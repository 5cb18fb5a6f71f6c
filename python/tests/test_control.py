"""Driving the hub from Python: faults, wiring, CAN↔LIN gateways, recording, statistics."""

import os

import can
import pytest

import fieldhub


def run_seeded_drop(seed):
    with fieldhub.Hub() as hub:
        a, b = hub.bus("can0", port_name="a"), hub.bus("can0", port_name="b")
        rule = hub.add_fault(channel="can0", at="bus", id=0x100, mask=0x7FF,
                             action={"type": "drop"}, probability=0.1, seed=seed)
        for i in range(1000):
            a.send(can.Message(arbitration_id=0x100, data=i.to_bytes(2, "little"), is_extended_id=False))
        reports = 0
        while True:
            try:
                a.flush_tx_buffer()
                break
            except can.CanOperationError as e:
                assert "dropped by a fault rule" in str(e)
                reports += 1
        assert reports >= 1, "the frames the rule dropped were reported to their sender"
        got = []
        while (m := b.recv(0.5)) is not None:
            got.append(int.from_bytes(m.data, "little"))
        counters = next(r for r in hub.faults() if r["id"] == rule["id"])
        assert counters["matched"] == 1000 and counters["applied"] == 1000 - len(got)
        a.shutdown()
        b.shutdown()
        return got


def test_seeded_drop_rule_is_observed_and_reproducible_from_python():
    first, again = run_seeded_drop(42), run_seeded_drop(42)
    assert 50 <= 1000 - len(first) <= 150
    assert first == again


def test_wiring_from_python(fieldhub_hub):
    a, b = fieldhub_hub.bus("can0", port_name="a"), fieldhub_hub.bus("can0", port_name="b")
    fieldhub_hub.unplug("b")
    a.send(can.Message(arbitration_id=1, is_extended_id=False))
    assert b.recv(0.3) is None
    fieldhub_hub.plug("b", "can0")
    a.send(can.Message(arbitration_id=2, is_extended_id=False))
    assert b.recv(5).arbitration_id == 2
    assert fieldhub_hub.port("b")["plugged"] is True
    assert [c["name"] for c in fieldhub_hub.channels()] == ["can0", "can1"]


def test_recording_and_stats_from_python(fieldhub_hub):
    a, b = fieldhub_hub.bus("can0"), fieldhub_hub.bus("can0")
    recording = fieldhub_hub.start_recording("session.asc", ["can0"])
    for i in range(10):
        a.send(can.Message(arbitration_id=0x300, data=[i], is_extended_id=False))
    for _ in range(10):
        b.recv(5)
    done = fieldhub_hub.stop_recording(recording["id"])
    assert done["frames"] == 10
    assert len(list(can.LogReader(os.path.join(fieldhub_hub.recordings_dir, "session.asc")))) == 10
    stats = fieldhub_hub.stats()
    assert stats["channels"][0]["frames"] == 10


def test_bus_state_follows_the_ports_controller(fieldhub_hub):
    bus = fieldhub_hub.bus("can0", port_name="ecu")
    assert bus.state == can.BusState.ACTIVE
    fieldhub_hub.force_state("ecu", "error_passive")
    assert bus.state == can.BusState.PASSIVE
    fieldhub_hub.force_state("ecu", "error_active")
    assert bus.state == can.BusState.ACTIVE


def test_a_hub_attached_through_shm_reaches_its_control_api(fieldhub_hub):
    attached = fieldhub.Hub.attach(fieldhub_hub.shm_url)
    bus = fieldhub_hub.bus("can0", port_name="via-shm")
    assert [p["name"] for p in attached.ports()] == ["via-shm"]
    bus.shutdown()


def test_a_hub_attached_through_shm_without_a_published_address_says_so():
    try:
        fieldhub.Hub.attach("shm://no-such-hub-here").channels()
    except fieldhub.HubUnreachable as e:
        assert "publishes no control address" in str(e)
    else:
        raise AssertionError("a hub that publishes nothing was reached")


GATEWAY_CONFIG = """
[[channel]]
name = "body"

[[channel]]
name = "doors"
protocol = "lin"
bitrate = 19200
timing = "timed"

[channel.lin]
schedule = [{ id = 0x10, delay_ms = 10 }]
"""


def test_a_gateway_added_from_python_carries_lin_responses_to_can_until_removed():
    with fieldhub.Hub(GATEWAY_CONFIG) as hub:
        door = hub.bus("doors", port_name="door")
        lin_rx, can_rx = hub.bus("doors", port_name="lin-rx"), hub.bus("body", port_name="can-rx")
        door.lin_stand(0x10, b"\x0A\x0B")  # answers every 0x10 header, every 10 ms
        with pytest.raises(fieldhub.HubError, match="node: only a gateway into a LIN channel publishes as a node"):
            hub.add_gateway("doors", "body", can_id=0x310, lin_id=0x10, node="door")
        gateway = hub.add_gateway("doors", "body", can_id=0x310, lin_id=0x10)
        assert (gateway["direction"], gateway["carried"]) == ("lin-to-can", 0)
        mapped = can_rx.recv(5)
        assert (mapped.arbitration_id, bytes(mapped.data)) == (0x310, b"\x0A\x0B")
        removed = hub.remove_gateway(gateway["gateway"])
        assert removed["removed"] and removed["carried"] >= 1
        assert hub.gateways() == []
        while can_rx.recv(0.05) is not None:  # what crossed before the removal
            pass
        # The LIN bus goes on answering; nothing crosses to CAN any more.
        assert can_rx.recv(0.2) is None
        while lin_rx.recv(0) is not None:  # from the first header (before the door stood) on
            pass
        heard = [lin_rx.recv(1) for _ in range(3)]
        assert all(m is not None and bytes(m.data) == b"\x0A\x0B" for m in heard), heard
        for bus in (door, lin_rx, can_rx):
            bus.shutdown()
