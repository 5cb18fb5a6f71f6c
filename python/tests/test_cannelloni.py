"""cannelloni endpoints (docs/cannelloni.md) with real peers: the
``can-cannelloni`` python-can backend from PyPI over TCP (cannelloni's stream
mode), and cannelloni's UDP packet format 2 built by hand from that backend's
own record encoder (the backend speaks TCP only). Every test checks what
arrived, in order, and what the hub counted for the peers."""

import socket
import struct
import threading
import time

import can
import pytest
from can_cannelloni.protocol import HANDSHAKE, encode_frames

CONFIG = """
[[channel]]
name = "can0"

[[cannelloni]]
channel = "can0"
listen = "tcp/127.0.0.1:0"

[[cannelloni]]
channel = "can0"
listen = "udp/127.0.0.1:0"
learn_peers = true
"""

FRAMES = 10_000
# Frames in flight at once: the test waits for each window, so no queue on
# the way (the peer's socket, a receive queue) can overflow.
WINDOW = 200
WAIT = 10.0


def numbered(n: int, can_id: int = 0x100) -> can.Message:
    return can.Message(arbitration_id=can_id, data=struct.pack(">I", n), is_extended_id=False)


def number_of(msg: can.Message) -> int:
    return struct.unpack(">I", bytes(msg.data))[0]


def endpoints(hub) -> dict:
    """The endpoints by kind, as the control API reports them."""
    return {e["listen"].split("/", 1)[0]: e for e in hub.request("GET", "/api/v1/cannelloni")}


def address(hub, kind: str):
    host, port = endpoints(hub)[kind]["listen"].split("/", 1)[1].rsplit(":", 1)
    return host, int(port)


def wait_for(what, condition, timeout: float = WAIT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def peers(hub, kind: str) -> list:
    return endpoints(hub)[kind]["peers"]


def cannelloni_bus(hub, count_before: int) -> can.BusABC:
    """A can-cannelloni bus on the hub's TCP endpoint, once its port is open."""
    host, port = address(hub, "tcp")
    bus = can.Bus(interface="cannelloni", channel=f"{host}:{port}", reconnect=False)
    wait_for("the peer's port", lambda: len(peers(hub, "tcp")) > count_before)
    return bus


def receive(bus, count: int) -> list:
    got = []
    while len(got) < count:
        msg = bus.recv(WAIT)
        assert msg is not None, f"received {len(got)} of {count} frames"
        got.append(msg)
    return got


def packet(seq: int, messages) -> bytes:
    """A cannelloni format 2 DATA packet."""
    messages = list(messages)
    return struct.pack("!BBBH", 2, 0, seq & 0xFF, len(messages)) + encode_frames(messages)


def frames_of(data: bytes):
    """The sequence number and frame numbers of a packet the hub sent."""
    version, op, seq, count = struct.unpack_from("!BBBH", data)
    assert (version, op) == (2, 0)
    at, numbers = 5, []
    for _ in range(count):
        can_id, length = struct.unpack_from("!IB", data, at)
        at += 5
        numbers.append(struct.unpack_from(">I", data, at)[0])
        at += length
    assert at == len(data), "no bytes after the packet's frames"
    return seq, numbers


@pytest.mark.fieldhub_config(CONFIG)
def test_can_cannelloni_exchanges_10000_numbered_frames_over_tcp_in_order(fieldhub_hub):
    native = fieldhub_hub.bus("can0")
    peer = cannelloni_bus(fieldhub_hub, 0)
    try:
        for start in range(0, FRAMES, WINDOW):
            for n in range(start, start + WINDOW):
                peer.send(numbered(n))
            assert [number_of(m) for m in receive(native, WINDOW)] == list(range(start, start + WINDOW))
        for start in range(0, FRAMES, WINDOW):
            for n in range(start, start + WINDOW):
                native.send(numbered(n, 0x200))
            got = receive(peer, WINDOW)
            assert [number_of(m) for m in got] == list(range(start, start + WINDOW))
            assert {m.arbitration_id for m in got} == {0x200}
    finally:
        peer.shutdown()
    [counted] = peers(fieldhub_hub, "tcp")
    assert counted["frames_in"] == FRAMES and counted["frames_out"] == FRAMES
    assert counted["malformed"] == counted["tx_dropped"] == counted["rx_dropped"] == 0


@pytest.mark.fieldhub_config(CONFIG)
def test_a_udp_peer_exchanges_10000_numbered_frames_in_numbered_packets(fieldhub_hub):
    native = fieldhub_hub.bus("can0")
    endpoint = address(fieldhub_hub, "udp")
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.settimeout(WAIT)
    try:
        per_packet = 20
        seq = 0
        for start in range(0, FRAMES, WINDOW):
            for first in range(start, start + WINDOW, per_packet):
                udp.sendto(packet(seq, (numbered(n) for n in range(first, first + per_packet))), endpoint)
                seq += 1
            assert [number_of(m) for m in receive(native, WINDOW)] == list(range(start, start + WINDOW))
        received, seqs = [], []
        for start in range(0, FRAMES, WINDOW):
            for n in range(start, start + WINDOW):
                native.send(numbered(n, 0x200))
            while len(received) < start + WINDOW:
                data, sender = udp.recvfrom(65536)
                assert sender == endpoint
                seq_no, numbers = frames_of(data)
                seqs.append(seq_no)
                received += numbers
        assert received == list(range(FRAMES))
        assert seqs == [n % 256 for n in range(len(seqs))], "the hub numbers its packets 0, 1, 2… without gaps"
    finally:
        udp.close()
    [counted] = peers(fieldhub_hub, "udp")
    assert counted["frames_in"] == FRAMES and counted["frames_out"] == FRAMES
    assert counted["seq_gaps"] == counted["seq_late"] == counted["malformed"] == 0


@pytest.mark.fieldhub_config(CONFIG)
def test_two_cannelloni_peers_and_a_native_client_see_one_order(fieldhub_hub):
    observer = fieldhub_hub.bus("can0")
    native = fieldhub_hub.bus("can0")
    a = cannelloni_bus(fieldhub_hub, 0)
    b = cannelloni_bus(fieldhub_hub, 1)
    each = 300
    senders = {"a": (a, 0x10), "b": (b, 0x20), "native": (native, 0x30)}
    try:
        threads = [
            threading.Thread(target=lambda bus=bus, can_id=can_id: [bus.send(numbered(n, can_id)) for n in range(each)])
            for bus, can_id in senders.values()
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        key = lambda m: (m.arbitration_id, number_of(m))  # noqa: E731
        everything = [key(m) for m in receive(observer, 3 * each)]
        for name, (bus, can_id) in senders.items():
            seen = [key(m) for m in receive(bus, 2 * each)]
            assert seen == [k for k in everything if k[0] != can_id], f"{name} sees the observer's order"
        for _, can_id in senders.values():
            assert [n for i, n in everything if i == can_id] == list(range(each)), "each sender's order kept"
    finally:
        a.shutdown()
        b.shutdown()


@pytest.mark.fieldhub_config(CONFIG)
def test_a_udp_sequence_gap_is_counted_and_late_packets_still_delivered(fieldhub_hub):
    native = fieldhub_hub.bus("can0")
    endpoint = address(fieldhub_hub, "udp")
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for seq in [254, 255, 0, 3, 4, 1]:
            udp.sendto(packet(seq, [numbered(seq)]), endpoint)
            assert number_of(receive(native, 1)[0]) == seq
    finally:
        udp.close()
    [counted] = peers(fieldhub_hub, "udp")
    assert counted["seq_gaps"] == 2, "packets 1 and 2 missing after 0 (the numbers wrap at 256)"
    assert counted["seq_late"] == 1, "packet 1 came after 4"
    assert counted["frames_in"] == 6


@pytest.mark.fieldhub_config(CONFIG)
def test_garbage_oversize_half_open_and_unread_peers_leave_the_hub_serving(fieldhub_hub):
    native = fieldhub_hub.bus("can0")
    tcp_endpoint = address(fieldhub_hub, "tcp")
    udp_endpoint = address(fieldhub_hub, "udp")
    opened = []

    def connect() -> socket.socket:
        s = socket.create_connection(tcp_endpoint, timeout=WAIT)
        opened.append(s)
        return s

    def closed_by_hub(s: socket.socket) -> bool:
        data = b"x"
        while data:
            data = s.recv(4096)
        return True

    try:
        # UDP: garbage, a wrong version, a 65,507-byte packet that claims more frames than it has.
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        opened.append(udp)
        udp.sendto(b"\xff" * 37, udp_endpoint)
        udp.sendto(struct.pack("!BBBH", 1, 0, 0, 0), udp_endpoint)
        udp.sendto(struct.pack("!BBBH", 2, 0, 0, 0xFFFF) + b"\x00" * 65_502, udp_endpoint)
        udp.sendto(packet(1, [numbered(1)]), udp_endpoint)
        assert number_of(receive(native, 1)[0]) == 1, "the same sender's good packet still goes on"
        wait_for("the malformed packets counted", lambda: peers(fieldhub_hub, "udp")[0]["malformed"] == 3)
        # TCP: a wrong banner, and a stream that stops being cannelloni.
        wrong = connect()
        wrong.sendall(b"HELLO-THERE!")
        assert wrong.recv(len(HANDSHAKE)) == HANDSHAKE and closed_by_hub(wrong)
        broken = connect()
        broken.sendall(HANDSHAKE + encode_frames([numbered(2)]) + b"\x00\x00\x01\x00\x7f")
        assert broken.recv(len(HANDSHAKE)) == HANDSHAKE
        assert number_of(receive(native, 1)[0]) == 2, "the frame before the garbage is on the bus"
        assert closed_by_hub(broken)
        # A half-open connection that never says a word, and a peer that never reads.
        connect()
        deaf = connect()
        deaf.sendall(HANDSHAKE)
        wait_for("the deaf peer's port", lambda: len(peers(fieldhub_hub, "tcp")) == 2)
        for n in range(20_000):
            native.send(numbered(n, 0x300))
        # Everyone else is served: a new peer and the native client talk.
        peer = cannelloni_bus(fieldhub_hub, 2)
        try:
            peer.send(numbered(7))
            assert number_of(receive(native, 1)[0]) == 7
            native.send(numbered(8, 0x400))
            msg = peer.recv(WAIT)
            while msg is not None and msg.arbitration_id == 0x300:
                # The flood's tail may still have been on its way when the peer's port opened.
                msg = peer.recv(WAIT)
            assert msg is not None and (msg.arbitration_id, number_of(msg)) == (0x400, 8)
        finally:
            peer.shutdown()
        counted = {p["peer"]: p for p in peers(fieldhub_hub, "tcp")}
        assert sum(p["malformed"] for p in counted.values()) == 1, "the broken stream counted"
    finally:
        for s in opened:
            s.close()


@pytest.mark.fieldhub_config(CONFIG)
def test_frames_the_bus_drops_for_a_peer_are_counted_for_it_as_cannelloni_cannot_tell_it(fieldhub_hub):
    native = fieldhub_hub.bus("can0")
    peer = cannelloni_bus(fieldhub_hub, 0)
    try:
        [entry] = peers(fieldhub_hub, "tcp")
        port = "cannelloni-" + entry["peer"].replace("/", "-").replace(":", "-")
        fieldhub_hub.add_fault(channel="can0", at="sender", sender=port, id=0x666, mask=0x7FF, action={"type": "drop"})
        for n in range(10):
            peer.send(numbered(n, 0x666 if n % 2 else 0x100))
        assert [number_of(m) for m in receive(native, 5)] == [0, 2, 4, 6, 8]
        wait_for("the dropped frames counted", lambda: peers(fieldhub_hub, "tcp")[0]["tx_dropped"] == 5)
        assert fieldhub_hub.port(port)["tx_dropped_by_reason"] == {"fault_rule": 5}
    finally:
        peer.shutdown()
