"""The python-can interface against a real hub: frame kinds, filters, echo,
order and no loss, python-can's helpers."""

import asyncio
import select
import threading

import can
import pytest

FD = """
[[channel]]
name = "can0"

[[channel]]
name = "fd0"
protocol = "canfd"
bitrate = 1000000
data_bitrate = 4000000
"""


def test_bus_is_found_through_python_cans_entry_point(fieldhub_hub):
    bus = can.Bus(interface="fieldhub", channel="can0", hub=fieldhub_hub.url)
    assert type(bus).__name__ == "FieldhubBus"
    bus.shutdown()


def test_frames_travel_with_hub_metadata(fieldhub_hub):
    a, b = fieldhub_hub.bus("can0"), fieldhub_hub.bus("can0")
    sent = [
        can.Message(arbitration_id=0x123, data=[1, 2, 3], is_extended_id=False),
        can.Message(arbitration_id=0x1ABCDEF0, data=b"\x00" * 8, is_extended_id=True),
        can.Message(arbitration_id=0x321, is_remote_frame=True, dlc=4, is_extended_id=False),
    ]
    for m in sent:
        a.send(m)
    got = [b.recv(5) for _ in sent]
    for s, g in zip(sent, got):
        assert (g.arbitration_id, g.is_extended_id, g.is_remote_frame, g.dlc) == (
            s.arbitration_id,
            s.is_extended_id,
            s.is_remote_frame,
            s.dlc,
        )
        assert g.is_rx and g.channel == "can0" and g.timestamp > 1.6e9
    assert got[0].data == bytearray([1, 2, 3])
    assert got[0].timestamp <= got[1].timestamp <= got[2].timestamp


@pytest.mark.fieldhub_config(FD)
def test_can_fd_frames_keep_length_and_flags(fieldhub_hub):
    a = fieldhub_hub.bus("fd0", fd=True)
    b = fieldhub_hub.bus("fd0", fd=True)
    for length in (0, 8, 12, 48, 64):
        a.send(can.Message(arbitration_id=0x42, data=bytes(range(length)), is_fd=True, bitrate_switch=True,
                           error_state_indicator=length == 12, is_extended_id=False))
    for length in (0, 8, 12, 48, 64):
        m = b.recv(5)
        assert m.is_fd and m.bitrate_switch and m.dlc == length and m.data == bytearray(range(length))
        assert m.error_state_indicator == (length == 12)


def test_error_frames_pass_through(fieldhub_hub):
    a, b = fieldhub_hub.bus("can0"), fieldhub_hub.bus("can0")
    a.send(can.Message(arbitration_id=0x4, is_error_frame=True, data=bytes([0, 0x10, 0, 0, 0, 0, 0, 0])))
    m = b.recv(5)
    assert m.is_error_frame and m.arbitration_id == 0x4 and m.data[1] == 0x10


def test_receive_own_messages_gives_tx_confirmations(fieldhub_hub):
    own = fieldhub_hub.bus("can0", receive_own_messages=True)
    other = fieldhub_hub.bus("can0")
    own.send(can.Message(arbitration_id=0x10, data=[7], is_extended_id=False))
    echo, seen = own.recv(5), other.recv(5)
    assert not echo.is_rx and seen.is_rx
    assert echo.timestamp == seen.timestamp
    quiet = fieldhub_hub.bus("can0")
    quiet.send(can.Message(arbitration_id=0x11, data=[8], is_extended_id=False))
    assert quiet.recv(0.2) is None


def test_filters_are_applied_before_python_sees_frames(fieldhub_hub):
    a = fieldhub_hub.bus("can0")
    b = fieldhub_hub.bus("can0", can_filters=[{"can_id": 0x100, "can_mask": 0x7F0, "extended": False}])
    for can_id, ext in ((0x101, False), (0x101, True), (0x201, False), (0x10F, False)):
        a.send(can.Message(arbitration_id=can_id, is_extended_id=ext, data=[1]))
    got = [b.recv(5) for _ in range(2)]
    assert [(m.arbitration_id, m.is_extended_id) for m in got] == [(0x101, False), (0x10F, False)]
    assert b.recv(0.2) is None
    b.set_filters(None)
    a.send(can.Message(arbitration_id=0x555, is_extended_id=False))
    assert b.recv(5).arbitration_id == 0x555


def test_hundred_thousand_frames_arrive_in_order_without_loss(fieldhub_hub):
    sender = fieldhub_hub.bus("can0")
    receiver = fieldhub_hub.bus("can0", block_on_overflow=True)
    total = 100_000
    got = []

    def receive():
        while len(got) < total:
            m = receiver.recv(30)
            assert m is not None, f"stalled after {len(got)}"
            got.append(int.from_bytes(m.data[:4], "little"))

    reader = threading.Thread(target=receive)
    reader.start()
    for i in range(total):
        sender.send(can.Message(arbitration_id=0x100, data=i.to_bytes(4, "little"), is_extended_id=False))
    reader.join()
    assert got == list(range(total))
    assert receiver.rx_dropped == 0


def test_shared_memory_and_tcp_buses_share_one_order(fieldhub_hub):
    # A private hub's buses use shared memory; the same hub over TCP is the
    # same bus, in the same order.
    assert fieldhub_hub.shm_url.startswith("shm://")
    senders = [fieldhub_hub.bus("can0"), can.Bus(interface="fieldhub", channel="can0", hub=fieldhub_hub.url)]
    watchers = [
        fieldhub_hub.bus("can0", block_on_overflow=True),
        can.Bus(interface="fieldhub", channel="can0", hub=fieldhub_hub.url, block_on_overflow=True),
    ]
    per_sender = 20_000
    seen = [[] for _ in watchers]

    def watch(bus, into):
        while len(into) < 2 * per_sender:
            m = bus.recv(30)
            assert m is not None, f"stalled after {len(into)}"
            into.append((m.arbitration_id, int.from_bytes(m.data[:4], "little")))

    threads = [threading.Thread(target=watch, args=(w, s)) for w, s in zip(watchers, seen)]
    for t in threads:
        t.start()

    def send(bus, can_id):
        for i in range(per_sender):
            bus.send(can.Message(arbitration_id=can_id, data=i.to_bytes(4, "little"), is_extended_id=False))

    sending = [threading.Thread(target=send, args=(b, 0x100 + n)) for n, b in enumerate(senders)]
    for t in sending:
        t.start()
    for t in sending + threads:
        t.join()
    assert seen[0] == seen[1], "the shared-memory and the TCP watcher saw different orders"
    for can_id in (0x100, 0x101):
        assert [n for i, n in seen[0] if i == can_id] == list(range(per_sender))
    for bus in senders + watchers:
        bus.shutdown()


def test_notifier_and_buffered_reader(fieldhub_hub):
    a, b = fieldhub_hub.bus("can0"), fieldhub_hub.bus("can0")
    reader = can.BufferedReader()
    notifier = can.Notifier(b, [reader])
    for i in range(50):
        a.send(can.Message(arbitration_id=i, data=[i], is_extended_id=False))
    got = [reader.get_message(5) for _ in range(50)]
    notifier.stop()
    assert [m.arbitration_id for m in got] == list(range(50))


def test_fileno_works_with_select(fieldhub_hub):
    a, b = fieldhub_hub.bus("can0"), fieldhub_hub.bus("can0")
    assert select.select([b.fileno()], [], [], 0)[0] == []
    a.send(can.Message(arbitration_id=1, data=[1], is_extended_id=False))
    assert select.select([b.fileno()], [], [], 5)[0] == [b.fileno()]
    assert b.recv(0).arbitration_id == 1


def test_asyncio_with_async_buffered_reader(fieldhub_hub):
    a, b = fieldhub_hub.bus("can0"), fieldhub_hub.bus("can0")

    async def main():
        reader = can.AsyncBufferedReader()
        notifier = can.Notifier(b, [reader], loop=asyncio.get_running_loop())
        for i in range(20):
            a.send(can.Message(arbitration_id=0x200 + i, is_extended_id=False))
        got = [await asyncio.wait_for(reader.get_message(), 5) for _ in range(20)]
        notifier.stop()
        return [m.arbitration_id for m in got]

    assert asyncio.run(main()) == [0x200 + i for i in range(20)]


@pytest.mark.fieldhub_config(FD)
def test_can_fd_payloads_between_lengths_are_padded_to_the_next_as_socketcan_does(fieldhub_hub):
    a = fieldhub_hub.bus("fd0", fd=True)
    b = fieldhub_hub.bus("fd0", fd=True)
    for length, padded in ((9, 12), (11, 12), (13, 16), (21, 24), (33, 48), (63, 64)):
        a.send(can.Message(arbitration_id=0x42, data=b"\x11" * length, is_fd=True, is_extended_id=False))
        m = b.recv(5)
        assert m.dlc == padded and m.data == bytearray(b"\x11" * length + b"\x00" * (padded - length)), length


def test_python_cans_tool_keywords_raise_no_warning(fieldhub_hub, recwarn):
    # python-can's tools (can.logger, can.player, can.viewer) pass single_handle=True.
    bus = can.Bus(interface="fieldhub", channel="can0", hub=fieldhub_hub.url, single_handle=True)
    bus.shutdown()
    assert not [w for w in recwarn if "ignores" in str(w.message)], [str(w.message) for w in recwarn]
