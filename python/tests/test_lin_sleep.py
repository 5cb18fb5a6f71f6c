"""LIN sleep and wake-up from Python (docs/buses.md, Sleep and wake-up), in
virtual time against a real hub: the control API puts the channel to sleep,
a Python slave's response to the sleeping bus is refused with the reason,
its wake-up pulse wakes the bus, and `fieldhub dump` (a real process) reads
the go-to-sleep command, the pulse and the schedule resuming at its first
slot 100 ms after the pulse's end — every value and time checked."""

import subprocess

import can
import pytest
from test_lin_node import FIELDHUB, wait_for_port

import fieldhub

CONFIG = """
[[channel]]
name = "body"
protocol = "lin"
bitrate = 19200
timing = "timed"

[channel.lin]
schedule = [{ id = 0x10, delay_ms = 10 }, { id = 0x11, delay_ms = 10 }]
"""


def body(hub):
    return next(c for c in hub.channels() if c["name"] == "body")


def test_a_python_slave_wakes_the_sleeping_bus_and_the_schedule_resumes_after_the_wake_up_delay():
    with fieldhub.Hub(CONFIG, time="virtual") as hub:
        # The reader's port opens at bus time 0 and starts the schedule.
        dump = subprocess.Popen(
            [str(FIELDHUB), "dump", "--hub", hub.url, "--port", "reader", "-t", "a", "-n", "5", "body"],
            stdout=subprocess.PIPE, text=True)
        try:
            wait_for_port(hub, "reader")
            # Asked at 0 ms, the command takes the next slot boundary: 10 ms.
            assert hub.lin_sleep("body")["lin_state"] == "awake"
            with can.Bus(interface="fieldhub", channel="body", hub=hub.url, port_name="door",
                         synchronized=True) as door:
                assert door.step(0.5) == 0.5
                assert body(hub)["lin_state"] == "asleep"
                door.lin_publish(0x10, b"\x01\x02")
                with pytest.raises(can.CanError, match="while the channel is asleep"):
                    door.flush_tx_buffer()
                # At 500 ms the pulse; the slave's buffer answers the first
                # header, 100 ms after the pulse's end.
                door.lin_wake_up()
                door.lin_stand(0x10, b"\x01\x02")
                assert door.step(0.12) == 0.62
                door.flush_tx_buffer()
                out, _ = dump.communicate(timeout=60)
        finally:
            dump.kill()
        lines = [" ".join(line.split()) for line in out.splitlines()]
        # 19.2 kbit/s: a header 34 bits (1.771 ms), the command 124 (6.458
        # ms), the pulse 5 (260.4 us), a 2-byte frame 64 (3.333 ms).
        assert lines == [
            "(0000000000.001770) body 10 [0] LIN no response",
            "(0000000000.016458) body 3C [8] 00 FF FF FF FF FF FF FF LIN GO-TO-SLEEP, classic checksum 00",
            "(0000000000.500260) body 00 [0] LIN WAKE-UP",
            "(0000000000.603593) body 10 [2] 01 02 LIN enhanced checksum AC",
            "(0000000000.612031) body 11 [0] LIN no response",
        ]
        state = body(hub)
        assert (state["lin_state"], state["sleeps"], state["wake_ups"]) == ("awake", 1, 1)
        with pytest.raises(fieldhub.HubError, match="is awake"):
            hub.lin_wake("body")
