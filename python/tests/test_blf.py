"""Vector BLF through fieldhub, checked against python-can's BLF writer and
reader (``can.BLFWriter``/``can.BLFReader``): what python-can writes,
``fieldhub convert`` and ``fieldhub replay`` read exactly; what ``fieldhub
record`` writes, python-can reads frame for frame."""

import re
import subprocess
import sys
import time
from pathlib import Path

import can
import pytest

#: The script pip wrote next to this interpreter.
FIELDHUB = Path(sys.executable).parent / "fieldhub"

FD_CONFIG = """
[[channel]]
name = "can0"

[[channel]]
name = "fd0"
protocol = "canfd"
bitrate = 1000000
data_bitrate = 4000000
"""

FD_LENGTHS = [0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64]


def numbered(i, timestamp=0.0):
    """Frame number ``i``: classic on channel 0 (standard, extended, remote),
    CAN FD on channel 1 (BRS, ESI, every length); ids and data count up."""
    kind = i % 5
    if kind == 0:
        return can.Message(timestamp=timestamp, arbitration_id=i % 0x800, is_extended_id=False,
                           data=i.to_bytes(4, "big"), channel=0)
    if kind == 1:
        return can.Message(timestamp=timestamp, arbitration_id=0x1000000 + i, data=i.to_bytes(8, "big"),
                           channel=0, is_rx=False)
    if kind == 2:
        return can.Message(timestamp=timestamp, arbitration_id=i % 0x800, is_extended_id=False,
                           is_remote_frame=True, dlc=i % 9, channel=0)
    data = bytes((i + k) % 256 for k in range(FD_LENGTHS[i % 16]))
    if kind == 3:
        return can.Message(timestamp=timestamp, arbitration_id=i % 0x800, is_extended_id=False, is_fd=True,
                           bitrate_switch=True, data=data, channel=1)
    return can.Message(timestamp=timestamp, arbitration_id=0x10000 + i, is_fd=True, error_state_indicator=True,
                       data=data, channel=1, is_rx=False)


def fields(message):
    return (message.arbitration_id, message.is_extended_id, message.is_remote_frame, message.is_fd,
            message.bitrate_switch, message.error_state_indicator, message.dlc, bytes(message.data))


def candump_line(message, ns):
    """The line ``fieldhub convert --direction`` writes for ``message`` at ``ns``."""
    if message.is_error_frame:
        frame = f"{0x20000000 | message.arbitration_id:08X}#{message.data.hex().upper()}"
    else:
        frame = f"{message.arbitration_id:08X}" if message.is_extended_id else f"{message.arbitration_id:03X}"
        if message.is_remote_frame:
            frame += "#R" + (str(message.dlc) if message.dlc else "")
        elif message.is_fd:
            flags = (1 if message.bitrate_switch else 0) | (2 if message.error_state_indicator else 0)
            frame += f"##{flags:X}{message.data.hex().upper()}"
        else:
            frame += "#" + message.data.hex().upper()
    direction = "T" if not message.is_rx else "R"
    return f"({ns // 10**9}.{ns % 10**9 // 1000:06}) can{message.channel} {frame} {direction}"


def python_can_ns(timestamp, first):
    """The time python-can's BLFWriter stores for ``timestamp``, in Unix ns:
    the header's start is the first time cut to the millisecond, each object
    its offset from that cut to the nanosecond."""
    start_ms = int(first * 1000)
    return start_ms * 1_000_000 + int((timestamp - start_ms / 1000) * 1e9)


def fieldhub(*args, timeout=60):
    out = subprocess.run([str(FIELDHUB), *map(str, args)], capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr
    return out


@pytest.mark.parametrize("compression", [-1, 0])
def test_numbered_frames_python_can_writes_to_blf_convert_exactly(tmp_path, compression):
    """CAN, CAN FD, remote and error frames over several containers (zlib or
    stored, objects split between them): ids, flags, data, direction and
    time to the microsecond."""
    first = 1700000000.123456
    messages = [numbered(i, first + i * 0.000731) for i in range(3000)]
    messages.insert(7, can.Message(timestamp=first + 0.0050015, arbitration_id=0x84, is_error_frame=True,
                                   data=bytes(range(1, 9)), channel=0))
    messages.sort(key=lambda m: m.timestamp)
    source = tmp_path / "python-can.blf"
    with can.BLFWriter(source, compression_level=compression) as writer:
        for message in messages:
            writer.on_message_received(message)

    lines = fieldhub("convert", "--direction", source, "-").stdout.splitlines()
    expected = [candump_line(m, python_can_ns(m.timestamp, first)) for m in messages]
    assert len(lines) == len(expected)
    for i, (line, want) in enumerate(zip(lines, expected)):
        assert line == want, f"frame {i}"


@pytest.mark.fieldhub_config(FD_CONFIG)
def test_fieldhub_replay_plays_python_cans_blf_file_frame_for_frame(fieldhub_hub, tmp_path):
    messages = [numbered(i, 1700000000.0 + i * 0.001) for i in range(200)]
    source = tmp_path / "python-can.blf"
    with can.BLFWriter(source) as writer:
        for message in messages:
            writer.on_message_received(message)
    classic, fd = fieldhub_hub.bus("can0"), fieldhub_hub.bus("fd0", fd=True)

    fieldhub("replay", "--hub", fieldhub_hub.url, "--fast", "--map", "can1=fd0", source)
    for channel, bus in ((0, classic), (1, fd)):
        sent = [m for m in messages if m.channel == channel]
        received = [bus.recv(5) for _ in sent]
        assert [fields(m) for m in received] == [fields(m) for m in sent]
        assert bus.recv(0.1) is None


def wait_for_ports(hub, count):
    deadline = time.monotonic() + 30
    while len(hub.ports()) < count:
        assert time.monotonic() < deadline, hub.ports()
        time.sleep(0.05)


@pytest.mark.fieldhub_config(FD_CONFIG)
def test_what_fieldhub_records_as_blf_python_can_reads_in_order_and_identical(fieldhub_hub, tmp_path):
    count = 600
    blf, log = tmp_path / "out.blf", tmp_path / "out.log"
    recorders = [
        subprocess.Popen([str(FIELDHUB), "record", "--hub", fieldhub_hub.url, "-n", str(count), *options,
                          "can0", "fd0"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for options in (["--format", "blf", "-o", str(blf)], ["-o", str(log)])
    ]
    wait_for_ports(fieldhub_hub, 4)
    buses = [fieldhub_hub.bus("can0"), fieldhub_hub.bus("fd0", fd=True)]
    sent = [numbered(i) for i in range(count)]
    for message in sent:
        buses[message.channel].send(message)
    for recorder in recorders:
        assert recorder.wait(60) == 0, recorder.stderr.read()

    read = list(can.BLFReader(blf))
    assert len(read) == count
    for channel in (0, 1):
        got = [m for m in read if m.channel == channel]
        assert [fields(m) for m in got] == [fields(m) for m in sent if m.channel == channel]
        assert all(m.is_rx for m in got)
    # The same frames as the candump recording, at its times (each channel in its order).
    lines = [re.match(r"\((\d+\.\d{6})\) (\S+) ", line).groups() for line in log.read_text().splitlines()]
    assert len(lines) == count
    for channel, name in enumerate(["can0", "fd0"]):
        times = [float(seconds) for seconds, on in lines if on == name]
        got = [m.timestamp for m in read if m.channel == channel]
        assert got == pytest.approx(times, abs=1.5e-6), name

    # The header's statistics: every frame and the two channel names counted.
    reader = can.BLFReader(blf)
    assert reader.object_count == count + 2
    assert reader.file_size == blf.stat().st_size
    assert reader.start_timestamp <= read[0].timestamp < reader.start_timestamp + 0.001
    last = max(m.timestamp for m in read)
    assert reader.stop_timestamp <= last < reader.stop_timestamp + 0.001
