"""The LIN node API from Python (docs/buses.md): a Python slave keeps a
standing response that answers every header of its identifier the hub's
schedule sends, replaces it and withdraws it, in virtual time against a
real hub; `fieldhub dump` reads the bus and the test checks every value and
time. Bad calls raise, naming the problem."""

import subprocess
import sys
import time
from pathlib import Path

import can
import pytest

import fieldhub

FIELDHUB = Path(sys.executable).parent / "fieldhub"

# Slots of 0x10 and 0x11, 10 ms each, at 19.2 kbit/s.
CONFIG = """
[[channel]]
name = "body"
protocol = "lin"
bitrate = 19200
timing = "timed"

[channel.lin]
schedule = [{ id = 0x10, delay_ms = 10 }, { id = 0x11, delay_ms = 10 }]
"""


def wait_for_port(hub, name):
    deadline = time.monotonic() + 30
    while not any(p["name"] == name for p in hub.ports()):
        assert time.monotonic() < deadline, f"port {name} never opened"
        time.sleep(0.02)


def test_a_python_slaves_standing_response_answers_every_header_until_replaced_and_withdrawn():
    # In virtual time the slave is the one participant: bus time moves only
    # as it steps.
    with fieldhub.Hub(CONFIG, time="virtual") as hub:
        # The reader's port opens first, at bus time 0, which starts the
        # schedule: its first headers go out before the slave has stood.
        dump = subprocess.Popen(
            [str(FIELDHUB), "dump", "--hub", hub.url, "--port", "reader", "-t", "a", "-n", "7", "body"],
            stdout=subprocess.PIPE, text=True)
        try:
            wait_for_port(hub, "reader")
            observer = can.Bus(interface="fieldhub", channel="body", hub=hub.url, port_name="observer")
            with can.Bus(interface="fieldhub", channel="body", hub=hub.url, port_name="slave",
                         synchronized=True) as slave:
                slave.lin_stand(0x10, b"\x01\x02")
                slave.lin_stand(0x11, b"\xAA\xBB\xCC\xDD", classic=True)
                assert slave.step(0.025) == 0.025
                # Replaced at 25 ms: the header of 0x10 at 40 ms carries 03 04.
                slave.lin_stand(0x10, b"\x03\x04")
                assert slave.step(0.020) == 0.045
                # Withdrawn at 45 ms: 0x11's header at 50 ms goes unanswered.
                slave.lin_withdraw(0x11)
                assert slave.step(0.020) == 0.065
                slave.flush_tx_buffer()
                out, _ = dump.communicate(timeout=60)
        finally:
            dump.kill()
        lines = [" ".join(line.split()) for line in out.splitlines()]
        # Slots: 0x10 at 0, 20, 40, 60 ms; 0x11 at 10, 30, 50 ms. A frame ends
        # its nominal time after its slot's start: 34 bits for a header
        # alone, 64 with 2 bytes, 84 with 4 (19.2 kbit/s); each response
        # with its checksum byte.
        assert lines == [
            "(0000000000.001770) body 10 [0] LIN no response",
            "(0000000000.014375) body 11 [4] AA BB CC DD LIN classic checksum EE",
            "(0000000000.023333) body 10 [2] 01 02 LIN enhanced checksum AC",
            "(0000000000.034375) body 11 [4] AA BB CC DD LIN classic checksum EE",
            "(0000000000.043333) body 10 [2] 03 04 LIN enhanced checksum A8",
            "(0000000000.051770) body 11 [0] LIN no response",
            "(0000000000.063333) body 10 [2] 03 04 LIN enhanced checksum A8",
        ]
        # A python-can reader sees each LIN frame as its identifier and data:
        # LIN's checksum model and the hub's no-response record use the flag
        # bits of CAN's extended and remote, which must not show as those.
        seen = []
        while len(seen) < 7 and (message := observer.recv(10)) is not None:
            seen.append((message.arbitration_id, bytes(message.data), message.is_extended_id,
                         message.is_remote_frame, message.is_error_frame))
        observer.shutdown()
        assert seen == [
            (0x10, b"", False, False, False),
            (0x11, b"\xAA\xBB\xCC\xDD", False, False, False),
            (0x10, b"\x01\x02", False, False, False),
            (0x11, b"\xAA\xBB\xCC\xDD", False, False, False),
            (0x10, b"\x03\x04", False, False, False),
            (0x11, b"", False, False, False),
            (0x10, b"\x03\x04", False, False, False),
        ]


def test_bad_lin_calls_raise_naming_the_problem():
    with fieldhub.Hub(CONFIG) as hub, \
            can.Bus(interface="fieldhub", channel="body", hub=hub.url, port_name="slave") as slave, \
            can.Bus(interface="fieldhub", channel="body", hub=hub.url, port_name="other") as other:
        with pytest.raises(ValueError, match="over 0x3F"):
            slave.lin_stand(0x40, b"\x01")
        with pytest.raises(ValueError, match="1 to 8 data bytes"):
            slave.lin_stand(0x10, bytes(9))
        # The hub's refusals come with the next flush.
        slave.lin_withdraw(0x10)
        with pytest.raises(can.CanError, match="which it does not have"):
            slave.flush_tx_buffer()
        slave.lin_stand(0x22, b"\x01")
        with pytest.raises(can.CanError, match="no unconditional slot"):
            slave.flush_tx_buffer()
        slave.lin_stand(0x10, b"\x01\x02")
        slave.flush_tx_buffer()
        other.lin_stand(0x10, b"\x05\x06")
        with pytest.raises(can.CanError, match="another port of the channel stands"):
            other.flush_tx_buffer()
