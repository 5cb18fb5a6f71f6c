"""``fieldhub convert`` between candump logs, Vector ASC and ASAM MDF4,
checked against the readers and writers other programs use: python-can's
(``can.io``) for every format and asammdf's, which python-can's MF4 reader
and writer are built on, for MDF4. BLF: ``test_blf.py``."""

import subprocess
import sys
from pathlib import Path

import asammdf
import can
import pytest

#: The script pip wrote next to this interpreter.
FIELDHUB = Path(sys.executable).parent / "fieldhub"

#: Every kind of frame a log holds, on two channels (python-can numbers them 0 and 1).
MESSAGES = [
    can.Message(timestamp=1700000000.5, arbitration_id=0x123, is_extended_id=False, data=b"\xde\xad\xbe\xef", channel=0),
    can.Message(timestamp=1700000000.625, arbitration_id=0x1ABCDEF0, data=bytes(range(12)), is_fd=True,
                bitrate_switch=True, channel=1, is_rx=False),
    can.Message(timestamp=1700000000.75, arbitration_id=0x7FF, is_extended_id=False, is_remote_frame=True, dlc=3,
                channel=0),
    can.Message(timestamp=1700000000.875, arbitration_id=0x42, is_extended_id=False, data=bytes(range(64)),
                is_fd=True, error_state_indicator=True, channel=1),
    can.Message(timestamp=1700000001.0, arbitration_id=0x1FFFFFFF, data=b"", channel=0),
]

#: MESSAGES as candump -L writes them (python-can's writer leaves out a remote frame's length).
CANDUMP_LOG = f"""\
(1700000000.500000) can0 123#DEADBEEF
(1700000000.625000) can1 1ABCDEF0##1000102030405060708090A0B
(1700000000.750000) can0 7FF#R3
(1700000000.875000) can1 042##2{bytes(range(64)).hex().upper()}
(1700000001.000000) can0 1FFFFFFF#
"""


def convert(source, target, *options):
    out = subprocess.run([str(FIELDHUB), "convert", *options, str(source), str(target)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out


def same_frames(read, expected=MESSAGES, channel=lambda m: m.channel):
    read = list(read)
    assert len(read) == len(expected), read
    for got, want in zip(read, expected):
        assert got.timestamp == pytest.approx(want.timestamp, abs=2e-6), (got, want)
        fields = ("arbitration_id", "is_extended_id", "is_remote_frame", "is_fd", "bitrate_switch",
                  "error_state_indicator", "dlc", "data")
        assert [getattr(got, f) for f in fields] == [getattr(want, f) for f in fields], (got, want)
        assert channel(got) == want.channel, (got, want)


@pytest.mark.parametrize("compression", [0, 1, 2])
def test_an_mf4_file_python_can_writes_converts_to_the_same_frames(tmp_path, compression):
    """asammdf as python-can drives it: plain, deflated and transposed data blocks."""
    source = tmp_path / "python-can.mf4"
    writer = can.io.MF4Writer(source, compression_level=compression)
    for message in MESSAGES:
        writer.on_message_received(message)
    writer.stop()
    convert(source, tmp_path / "out.log")
    same_frames(can.io.CanutilsLogReader(tmp_path / "out.log"), channel=lambda m: int(m.channel[3:]))


def test_the_mf4_file_fieldhub_writes_reads_in_python_can_and_asammdf(tmp_path):
    source = tmp_path / "in.log"
    source.write_text(CANDUMP_LOG)
    convert(source, tmp_path / "out.mf4")
    same_frames(can.io.MF4Reader(tmp_path / "out.mf4"))

    mdf = asammdf.MDF(tmp_path / "out.mf4")
    assert mdf.version == "4.10"
    assert mdf.header.start_time.timestamp() == pytest.approx(MESSAGES[0].timestamp, abs=1e-6)
    data_frames = [m for m in MESSAGES if not m.is_remote_frame]
    ids = mdf.get("CAN_DataFrame.ID").samples
    assert list(ids) == [m.arbitration_id for m in data_frames]
    assert list(mdf.get("CAN_RemoteFrame.DLC").samples) == [3]
    mdf.close()


def test_asc_converts_both_ways_as_python_can_reads_and_writes_it(tmp_path):
    written = tmp_path / "python-can.asc"
    with can.ASCWriter(written) as writer:
        for message in MESSAGES:
            writer.on_message_received(message)
    convert(written, tmp_path / "from-asc.log")
    same_frames(can.io.CanutilsLogReader(tmp_path / "from-asc.log"), channel=lambda m: int(m.channel[3:]))

    convert(tmp_path / "from-asc.log", tmp_path / "again.asc")
    same_frames(can.ASCReader(tmp_path / "again.asc", relative_timestamp=False))
    convert(tmp_path / "again.asc", tmp_path / "again.mf4")
    same_frames(can.io.MF4Reader(tmp_path / "again.mf4"))


def test_an_unknown_output_format_is_named_with_the_fix(tmp_path):
    (tmp_path / "in.log").write_text("(1700000000.000000) can0 123#00\n")
    out = subprocess.run([str(FIELDHUB), "convert", str(tmp_path / "in.log"), str(tmp_path / "out.trc")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "--to candump|asc|blf|mf4" in out.stderr, out.stderr
