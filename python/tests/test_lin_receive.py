"""What a python-can bus on a LIN channel receives (fieldhub.LinMessage,
docs/buses.md): each frame of a real hub's LIN schedule in virtual time
with its identifier, data, checksum model and byte, and the no-response,
checksum-error and collision marks, none of them as CAN's flags."""

import copy
import subprocess
import sys
from pathlib import Path

import can
import pytest

import fieldhub

FIELDHUB = Path(sys.executable).parent / "fieldhub"

# An event-triggered 0x30 carrying the doors' 0x11 and 0x12, and two
# unconditional frames; 10 ms slots at 19.2 kbit/s.
CONFIG = """
[[channel]]
name = "doors"
protocol = "lin"
bitrate = 19200
timing = "timed"

[channel.lin]
schedule = [{ id = 0x30, delay_ms = 10 }, { id = 0x10, delay_ms = 10 }, { id = 0x20, delay_ms = 10 }]

[[channel.lin.event_triggered]]
name = "DoorEvents"
id = 0x30
frames = [0x11, 0x12]
collision_schedule = [{ id = 0x11, delay_ms = 10 }, { id = 0x12, delay_ms = 10 }]
"""

# A frame's end: 34 bits of header and 10 per response byte and checksum.
HEADER_ALONE = 34 / 19200
TWO_BYTES = 64 / 19200


def test_a_lin_bus_receives_each_frame_with_its_checksum_and_marks():
    with fieldhub.Hub(CONFIG, time="virtual") as hub:
        # The observer's port starts the schedule at bus time 0: the first
        # 0x30 header goes out before anyone has published.
        observer = can.Bus(interface="fieldhub", channel="doors", hub=hub.url, port_name="observer")
        for port, frame in [
            ("door", "L10#0102!55"),  # a faulty slave: checksum byte 55, not AC
            ("seat", "L20#AABB/C"),  # the classic checksum
            ("left", "L11#1101"),  # both doors answer the next 0x30 header
            ("right", "L12#9202"),
        ]:
            subprocess.run([str(FIELDHUB), "send", "--hub", hub.url, "--port", port, "doors", frame],
                           check=True, timeout=60)
        hub.run_until(0.08)
        received = [observer.recv(10) for _ in range(8)]
        observer.shutdown()
    assert all(isinstance(m, fieldhub.LinMessage) for m in received), received
    seen = [
        (round(m.timestamp, 6), m.arbitration_id, bytes(m.data), m.lin_checksum, m.lin_checksum_model,
         m.lin_no_response, m.lin_checksum_error, m.lin_collision)
        for m in received
    ]
    e, c = "enhanced", "classic"
    assert seen == [
        (round(0.000 + HEADER_ALONE, 6), 0x30, b"", 0x00, e, True, False, False),
        (round(0.010 + TWO_BYTES, 6), 0x10, b"\x01\x02", 0x55, e, False, True, False),
        (round(0.020 + TWO_BYTES, 6), 0x20, b"\xAA\xBB", 0x99, c, False, False, False),
        # The bus's read of 11 01 FC and 92 02 7A (checksums under 0x30's
        # protected identifier F0), ANDed bit by bit.
        (round(0.030 + TWO_BYTES, 6), 0x30, b"\x10\x00", 0x78, e, False, False, True),
        (round(0.040 + TWO_BYTES, 6), 0x11, b"\x11\x01", 0xDC, e, False, False, False),
        (round(0.050 + TWO_BYTES, 6), 0x12, b"\x92\x02", 0xD8, e, False, False, False),
        (round(0.060 + HEADER_ALONE, 6), 0x10, b"", 0x00, e, True, False, False),
        (round(0.070 + HEADER_ALONE, 6), 0x20, b"", 0x00, e, True, False, False),
    ]
    # None of LIN's marks shows as a CAN flag that shares its bit.
    for m in received:
        assert (m.is_extended_id, m.is_remote_frame, m.is_error_frame, m.bitrate_switch,
                m.error_state_indicator, m.is_fd) == (False,) * 6, repr(m)
    assert [m.lin_protected_id for m in received[:3]] == [0xF0, 0x50, 0x20]
    faulty = received[1]
    assert str(faulty).endswith("LIN enhanced checksum 55 checksum_error")
    assert repr(faulty).startswith("fieldhub.LinMessage(") and "lin_checksum=0x55" in repr(faulty)
    for copied in (copy.copy(faulty), copy.deepcopy(faulty)):
        assert isinstance(copied, fieldhub.LinMessage)
        assert (copied.lin_checksum, copied.lin_checksum_error, bytes(copied.data)) == (0x55, True, b"\x01\x02")


def test_a_lin_message_refuses_an_unknown_checksum_model():
    with pytest.raises(ValueError, match="neither 'classic' nor 'enhanced'"):
        fieldhub.LinMessage(arbitration_id=0x10, lin_checksum_model="lin1.3")


def test_a_lin_bus_receives_the_go_to_sleep_command_and_the_wake_up_pulse():
    config = CONFIG.replace('[{ id = 0x30, delay_ms = 10 }, { id = 0x10, delay_ms = 10 }, { id = 0x20, delay_ms = 10 }]',
                            '[{ id = 0x10, delay_ms = 10 }]')
    with fieldhub.Hub(config, time="virtual") as hub:
        observer = can.Bus(interface="fieldhub", channel="doors", hub=hub.url, port_name="observer")
        with can.Bus(interface="fieldhub", channel="doors", hub=hub.url, port_name="door", synchronized=True) as door:
            hub.lin_sleep("doors")  # at the next slot boundary, 10 ms
            door.step(0.5)
            door.lin_wake_up()
            door.step(0.05)
        received = [observer.recv(10) for _ in range(3)]
        observer.shutdown()
    header, sleep, pulse = received
    assert (header.arbitration_id, header.lin_no_response, header.lin_wake_up) == (0x10, True, False)
    assert (sleep.arbitration_id, bytes(sleep.data), sleep.lin_checksum_model) == (0x3C, b"\x00" + b"\xFF" * 7, "classic")
    # The pulse: 5 bits at 19.2 kbit/s from 500 ms, no identifier or data.
    assert (pulse.lin_wake_up, pulse.arbitration_id, bytes(pulse.data), pulse.lin_no_response) == (True, 0, b"", False)
    assert round(pulse.timestamp, 6) == round(0.5 + 5 / 19200, 6)
    assert str(pulse).endswith("wake_up")
