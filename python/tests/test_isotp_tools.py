"""``fieldhub isotp send`` and ``recv`` against another ISO-TP implementation,
python's can-isotp on the fieldhub python-can interface: payloads of 4,095
bytes and 60,000 bytes (ISO 15765-2:2016's 32-bit first-frame length) both
ways, classic CAN and CAN FD, under flow control with block size 8 (and
STmin 1 ms where fieldhub's receiver asks for it)."""

import subprocess
import sys
import time
from pathlib import Path

import isotp
import pytest

#: The script pip wrote next to this interpreter.
FIELDHUB = Path(sys.executable).parent / "fieldhub"

CHANNELS = """
[[channel]]
name = "can0"

[[channel]]
name = "fd0"
protocol = "canfd"
"""

#: (channel, CAN FD, payload size): classic up to 4,095 bytes and beyond, CAN FD beyond.
CASES = [("can0", False, 4095), ("can0", False, 60000), ("fd0", True, 60000)]


def payload_of(size):
    return bytes((i * 7 + 3) % 256 for i in range(size))


def can_isotp(hub, channel, fd, txid, rxid, **params):
    """A can-isotp stack on its own lossless bus: fieldhub's sender does not
    wait for a python reader between consecutive frames."""
    bus = hub.bus(channel, fd=fd, block_on_overflow=True)
    params = {
        "tx_data_length": 64 if fd else 8,
        "can_fd": fd,
        "max_frame_size": 1 << 20,
        "rx_flowcontrol_timeout": 5000,
        "rx_consecutive_frame_timeout": 5000,
        **params,
    }
    address = isotp.Address(isotp.AddressingMode.Normal_11bits, txid=txid, rxid=rxid)
    stack = isotp.CanStack(bus, address=address, params=params)
    stack.start()
    return stack


def link(fd):
    return ["-L", "72:64:0"] if fd else []


@pytest.mark.fieldhub_config(CHANNELS)
@pytest.mark.parametrize("channel, fd, size", CASES)
def test_fieldhub_isotp_send_reaches_can_isotp(fieldhub_hub, channel, fd, size):
    receiver = can_isotp(fieldhub_hub, channel, fd, 0x7E8, 0x7E0, blocksize=8, stmin=0)
    payload = payload_of(size)
    try:
        sent = subprocess.run(
            [str(FIELDHUB), "isotp", "send", "--hub", fieldhub_hub.url, "-s", "7E0", "-d", "7E8", *link(fd), channel],
            input=" ".join(f"{b:02X}" for b in payload), capture_output=True, text=True, timeout=60,
        )
        assert sent.returncode == 0, sent.stderr
        got = receiver.recv(block=True, timeout=30)
    finally:
        receiver.stop()
    assert got == payload, f"{size} bytes sent, {None if got is None else len(got)} received"


def wait_for_port(hub, name):
    deadline = time.monotonic() + 30
    while not any(port["name"] == name for port in hub.ports()):
        assert time.monotonic() < deadline, f"no port {name}"
        time.sleep(0.05)


@pytest.mark.fieldhub_config(CHANNELS)
@pytest.mark.parametrize("channel, fd, size", [("can0", False, 4095), ("fd0", True, 60000)])
def test_can_isotp_reaches_fieldhub_isotp_recv(fieldhub_hub, channel, fd, size):
    recv = subprocess.Popen(
        [str(FIELDHUB), "isotp", "recv", "--hub", fieldhub_hub.url, "--port", "ecu", "-s", "7E8", "-d", "7E0",
         "-b", "8", "-m", "1", *link(fd), channel],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    sender = None
    try:
        wait_for_port(fieldhub_hub, "ecu")
        sender = can_isotp(fieldhub_hub, channel, fd, 0x7E0, 0x7E8)
        payload = payload_of(size)
        sender.send(payload)
        out, err = recv.communicate(timeout=60)
    finally:
        if sender is not None:
            sender.stop()
        if recv.poll() is None:
            recv.kill()
            recv.wait()
    assert recv.returncode == 0, err
    assert bytes.fromhex(out) == payload
