"""The hub's socketcand server (docs/socketcand.md) with python-can's own
``socketcand`` interface: numbered frames through the hub in order both
ways, a native fieldhub client on the same channel seeing the same order."""

import socket
import struct

import can

from fieldhub import Hub

FRAMES = 10_000
# Frames in flight at once: the test takes each window before it sends the
# next, so no receive queue on the way can overflow.
WINDOW = 200
WAIT = 10.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def numbered(n: int, can_id: int) -> can.Message:
    return can.Message(arbitration_id=can_id, data=struct.pack(">I", n), is_extended_id=False)


def take(bus: can.BusABC, count: int) -> list:
    got = []
    while len(got) < count:
        msg = bus.recv(WAIT)
        assert msg is not None, f"only {len(got)} of {count} frames arrived"
        got.append((msg.arbitration_id, struct.unpack(">I", bytes(msg.data))[0]))
    return got


def socketcand_bus(port: int) -> can.BusABC:
    return can.Bus(interface="socketcand", host="127.0.0.1", port=port, channel="can0")


def test_python_cans_socketcand_interface_carries_ten_thousand_frames_in_order_beside_a_native_client():
    port = free_port()
    config = f'[hub]\nsocketcand = "127.0.0.1:{port}"\n\n[[channel]]\nname = "can0"\n'
    with Hub(config) as hub:
        native = hub.bus("can0")
        sender, listener = socketcand_bus(port), socketcand_bus(port)
        try:
            # socketcand → hub: the native client and another socketcand
            # session see the sender's frames in the order sent.
            for start in range(0, FRAMES, WINDOW):
                for n in range(start, start + WINDOW):
                    sender.send(numbered(n, 0x100))
                expected = [(0x100, n) for n in range(start, start + WINDOW)]
                assert take(native, WINDOW) == expected
                assert take(listener, WINDOW) == expected
            # hub → socketcand: a native client's frames reach both sessions
            # in the channel's order.
            for start in range(0, FRAMES, WINDOW):
                for n in range(start, start + WINDOW):
                    native.send(numbered(n, 0x200))
                expected = [(0x200, n) for n in range(start, start + WINDOW)]
                assert take(listener, WINDOW) == expected
                assert take(sender, WINDOW) == expected
            assert listener.recv(0.1) is None and native.recv(0.1) is None, "nothing more than was sent"
        finally:
            sender.shutdown()
            listener.shutdown()


def test_a_hub_with_a_token_refuses_socketcand_clients_with_the_reason():
    port = free_port()
    config = f'[hub]\nsocketcand = "127.0.0.1:{port}"\ntoken = "secret-token-for-the-test"\n\n[[channel]]\nname = "can0"\n'
    with Hub(config, token="secret-token-for-the-test"):
        with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as conn:
            said = conn.recv(4096).decode()
            assert said.startswith("< error this hub requires a token and socketcand cannot present one"), said
