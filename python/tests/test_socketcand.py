"""The hub's socketcand server (docs/socketcand.md) with python-can's own
``socketcand`` interface: numbered frames through the hub in order both
ways, a native fieldhub client on the same channel seeing the same order;
a BCM cyclic job in virtual time, exactly on its period as python-can's
interface sees it."""

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


def expect(conn: socket.socket, element: str) -> None:
    """Read one ``< … >`` element from ``conn`` and compare it."""
    said = b""
    while not said.endswith(b">"):
        chunk = conn.recv(1)
        assert chunk, f"the hub closed the connection after {said!r}"
        said += chunk
    assert said.decode().strip() == element, said


def test_a_bcm_job_keeps_its_period_in_bus_time_as_python_cans_socketcand_interface_sees_it():
    # python-can's socketcand interface has no BCM of its own (its
    # send_periodic is a python-can thread sending '< send >' on the wall
    # clock); a client that runs its cyclic frames on the server says
    # '< add >' in BCM mode, and the hub runs the job on bus time.
    port = free_port()
    config = f'[hub]\nsocketcand = "127.0.0.1:{port}"\n\n[[channel]]\nname = "can0"\n'
    with Hub(config, time="virtual") as hub:
        stepper = hub.bus("can0", synchronized=True)
        receiver = socketcand_bus(port)
        with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as bcm:
            expect(bcm, "< hi >")
            bcm.sendall(b"< open can0 >")
            expect(bcm, "< ok >")
            # Bus time stands at 0 until the participant steps; the echo
            # answers once the bus has the job.
            bcm.sendall(b"< add 0 10000 123 2 11 22 >< echo >")
            expect(bcm, "< echo >")

            def seen(count):
                got = [receiver.recv(WAIT) for _ in range(count)]
                assert None not in got, got
                return [(round(m.timestamp * 1_000_000), m.arbitration_id, bytes(m.data)) for m in got]

            assert stepper.step(0.1) == 0.1
            assert seen(11) == [(k * 10_000, 0x123, b"\x11\x22") for k in range(11)]
            # modify the data: the next cycle carries it, on the same phase.
            bcm.sendall(b"< update 123 1 33 >< echo >")
            expect(bcm, "< echo >")
            stepper.step(0.05)
            assert seen(5) == [(k * 10_000, 0x123, b"\x33") for k in range(11, 16)]
            # stop: no cycle after it; the next frame is the participant's at 250 ms.
            bcm.sendall(b"< delete 123 >< echo >")
            expect(bcm, "< echo >")
            assert stepper.step(0.1) == 0.25
            stepper.send(can.Message(arbitration_id=0x7FF, data=[], is_extended_id=False))
            stepper.step(0.01)
            assert seen(1) == [(250_000, 0x7FF, b"")]
        receiver.shutdown()
        stepper.shutdown()
