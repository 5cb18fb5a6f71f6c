"""What a python-can program expects of a SocketCAN bus, on a fieldhub bus:
CAN FD only where asked for, inverted filters, listen-only (``--passive``),
and ``can.detect_available_configs``."""

import socket
import warnings

import can
import pytest

CAN_INV_FILTER = 0x20000000

FD = """
[[channel]]
name = "can0"

[[channel]]
name = "fd0"
protocol = "canfd"
"""

LONELY = """
[[channel]]
name = "can0"
no_ack = true
"""


def fd_message(n: int) -> can.Message:
    return can.Message(arbitration_id=0x400, data=n.to_bytes(4, "little") + bytes(8), is_fd=True, is_extended_id=False)


def classic_message(n: int) -> can.Message:
    return can.Message(arbitration_id=0x100, data=n.to_bytes(4, "little"), is_extended_id=False)


def drain(bus: can.BusABC) -> list:
    got = []
    while (m := bus.recv(0.5)) is not None:
        got.append(m)
    return got


@pytest.mark.fieldhub_config(FD)
def test_fd_true_on_a_classic_channel_is_refused_at_open(fieldhub_hub):
    with pytest.raises(can.CanInitializationError, match="channel 'can0' is classic CAN"):
        fieldhub_hub.bus("can0", fd=True)


@pytest.mark.fieldhub_config(FD)
def test_a_bus_without_fd_neither_sends_nor_receives_can_fd_frames(fieldhub_hub):
    sender = fieldhub_hub.bus("fd0", fd=True)
    classic_only, fd_reader = fieldhub_hub.bus("fd0", block_on_overflow=True), fieldhub_hub.bus(
        "fd0", fd=True, block_on_overflow=True
    )
    with pytest.raises(can.CanOperationError, match="opened without FD"):
        classic_only.send(fd_message(0))
    for n in range(200):
        sender.send(fd_message(n) if n % 2 == 0 else classic_message(n))
    sender.flush_tx_buffer()
    everything = drain(fd_reader)
    assert [int.from_bytes(m.data[:4], "little") for m in everything] == list(range(200))
    assert [m.is_fd for m in everything] == [n % 2 == 0 for n in range(200)]
    classic = drain(classic_only)
    assert [int.from_bytes(m.data[:4], "little") for m in classic] == list(range(1, 200, 2))
    assert not any(m.is_fd for m in classic)
    assert classic_only.rx_dropped == 0


def test_inverted_filters_pass_what_they_do_not_match(fieldhub_hub):
    sender = fieldhub_hub.bus("can0")
    reader = fieldhub_hub.bus(
        "can0",
        block_on_overflow=True,
        can_filters=[{"can_id": 0x100 | CAN_INV_FILTER, "can_mask": 0x7FF, "extended": False}],
    )
    for n in range(300):
        sender.send(can.Message(arbitration_id=0x100 + n % 3, data=n.to_bytes(2, "little"), is_extended_id=False))
    sender.flush_tx_buffer()
    got = drain(reader)
    expected = [n for n in range(300) if n % 3 != 0]
    assert [int.from_bytes(m.data, "little") for m in got] == expected
    assert all(m.arbitration_id != 0x100 for m in got)


def test_a_listen_only_bus_hears_everything_and_sends_nothing(fieldhub_hub):
    talker = fieldhub_hub.bus("can0")
    quiet = fieldhub_hub.bus("can0", block_on_overflow=True, state=can.BusState.PASSIVE)
    assert quiet.state == can.BusState.PASSIVE
    with pytest.raises(can.CanOperationError, match="listen-only"):
        quiet.send(classic_message(0))
    for n in range(100):
        talker.send(classic_message(n))
    talker.flush_tx_buffer()
    assert [int.from_bytes(m.data, "little") for m in drain(quiet)] == list(range(100))


@pytest.mark.fieldhub_config(LONELY)
def test_bus_state_passive_is_listen_only_as_can_logger_passive_sets_it(fieldhub_hub):
    # python -m can.logger --passive opens the bus, then sets its state.
    logger = fieldhub_hub.bus("can0", block_on_overflow=True, can_filters=[{"can_id": 0x100, "can_mask": 0x7FF}])
    logger.state = can.BusState.PASSIVE
    assert logger.state == can.BusState.PASSIVE
    with pytest.raises(can.CanOperationError, match="listen-only"):
        logger.send(classic_message(0))
    # On a channel that emulates a missing ACK, a listen-only logger does not
    # acknowledge: the lone sender's frame never goes out...
    sender = fieldhub_hub.bus("can0")
    sender.send(classic_message(7))
    assert not [m for m in drain(logger) if not m.is_error_frame]
    # ...until the logger becomes an active node again (its filters kept).
    logger.state = can.BusState.ACTIVE
    heard = [m for m in drain(logger) if not m.is_error_frame]
    assert [int.from_bytes(m.data, "little") for m in heard] == [7]
    sender.send(can.Message(arbitration_id=0x200, data=b"\x01", is_extended_id=False))
    sender.flush_tx_buffer()
    assert not [m for m in drain(logger) if not m.is_error_frame], "the filter still holds"
    with pytest.raises(ValueError, match="ACTIVE or can.BusState.PASSIVE"):
        logger.state = can.BusState.ERROR


@pytest.mark.fieldhub_config(FD)
def test_detect_available_configs_lists_the_hubs_channels(fieldhub_hub, monkeypatch):
    monkeypatch.setenv("FIELDHUB_HUB", fieldhub_hub.url)
    configs = can.detect_available_configs(["fieldhub"])
    mine = sorted((c["channel"], c["fd"]) for c in configs if c["hub"] == fieldhub_hub.url)
    assert mine == [("can0", False), ("fd0", True)]
    assert all(c["interface"] == "fieldhub" for c in configs)
    # Each config opens a bus as it stands.
    config = next(c for c in configs if c["channel"] == "fd0" and c["hub"] == fieldhub_hub.url)
    bus = can.Bus(**config)
    bus.shutdown()


def test_detect_available_configs_is_empty_without_a_hub(monkeypatch):
    monkeypatch.setenv("FIELDHUB_HUB", "tcp://127.0.0.1:1")
    monkeypatch.setattr("fieldhub.bus.default_hub", lambda: "tcp://127.0.0.1:1")
    # Only the unreachable address and the default TCP port are tried.
    try:
        socket.create_connection(("127.0.0.1", 29536), timeout=1).close()
    except OSError:
        pass
    else:
        pytest.fail("a hub is listening on the default port 29536: stop it, this test needs no hub there")
    assert can.detect_available_configs(["fieldhub"]) == []


def test_bitrates_are_the_hubs_and_unknown_keywords_are_named(fieldhub_hub):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # The channel's own bitrate is accepted, and python-can's defaults
        # bring no warning.
        fieldhub_hub.bus("can0", bitrate=500000).shutdown()
    with pytest.raises(can.CanInitializationError, match="bitrate=250000, but channel 'can0' runs at 500000"):
        fieldhub_hub.bus("can0", bitrate=250000)
    with pytest.warns(UserWarning, match="ignores sjw, tseg1"):
        fieldhub_hub.bus("can0", tseg1=13, sjw=1).shutdown()
