"""Raw frames in Python (spec/protocol.md 4.1.3): a ``protocol = "raw"``
channel carries a 32-bit id and up to 2,048 opaque bytes, which python-can
has no message type for, so fieldhub's is ``fieldhub.RawMessage``, a
``can.Message``. Real hub, real buses, the Rust CLI as the other side."""

import copy
import subprocess
import sys
from pathlib import Path

import can
import pytest

import fieldhub

RAW = """
[[channel]]
name = "field"
protocol = "raw"
"""


@pytest.mark.fieldhub_config(RAW)
def test_a_2048_byte_raw_frame_crosses_with_its_32_bit_id_as_a_raw_message(fieldhub_hub):
    a, b = fieldhub_hub.bus("field"), fieldhub_hub.bus("field")
    data = bytes((i * 5 + 3) & 0xFF for i in range(2048))
    a.send(fieldhub.RawMessage(arbitration_id=0xDEADBEEF, data=data))
    a.send(fieldhub.RawMessage(arbitration_id=7, data=b""))
    got = b.recv(5)
    assert isinstance(got, fieldhub.RawMessage)
    assert (got.arbitration_id, got.dlc, bytes(got.data)) == (0xDEADBEEF, 2048, data)
    assert not (got.is_fd or got.is_extended_id or got.is_remote_frame or got.is_error_frame)
    assert isinstance(copy.copy(got), fieldhub.RawMessage) and copy.deepcopy(got).equals(got)
    assert "fieldhub.RawMessage(" in repr(got) and "RAW id DEADBEEF" in str(got)
    empty = b.recv(5)
    assert isinstance(empty, fieldhub.RawMessage) and (empty.arbitration_id, empty.dlc) == (7, 0)
    assert not empty.equals(can.Message(arbitration_id=7, data=b"", check=False, timestamp=empty.timestamp))
    a.shutdown()
    b.shutdown()


@pytest.mark.fieldhub_config(RAW)
def test_raw_frames_from_the_rust_cli_reach_python_and_frames_of_other_kinds_are_refused_naming_why(fieldhub_hub):
    bus = fieldhub_hub.bus("field")
    cli = Path(sys.executable).parent / "fieldhub"
    gen = [str(cli), "gen", "--hub", fieldhub_hub.url, "--raw", "-n", "2", "-g", "0", "-I", "i", "-D", "A5B6C7"]
    subprocess.run(gen + ["field"], check=True)
    got = [bus.recv(5) for _ in range(2)]
    assert all(isinstance(m, fieldhub.RawMessage) for m in got), got
    assert [(m.arbitration_id, bytes(m.data)) for m in got] == [(0, b"\xa5\xb6\xc7"), (1, b"\xa5\xb6\xc7")]
    with pytest.raises(ValueError, match="a raw frame carries at most 2048 data bytes, got 2049"):
        bus.send(fieldhub.RawMessage(arbitration_id=1, data=bytes(2049)))
    with pytest.raises(ValueError, match="32 bits"):
        bus.send(fieldhub.RawMessage(arbitration_id=1 << 32, data=b"\x01"))
    bus.send(can.Message(arbitration_id=0x123, data=[1], is_extended_id=False))
    with pytest.raises(can.CanOperationError, match="raw"):
        bus.flush_tx_buffer()
    bus.shutdown()
