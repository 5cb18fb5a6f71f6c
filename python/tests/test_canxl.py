"""CAN XL frames in Python (spec/protocol.md 4.1.2): python-can has no XL
message type, so fieldhub's is ``fieldhub.CanXlMessage``, a ``can.Message``
whose XL header is in attributes of its own. Real hub, real buses."""

import copy
import subprocess
import sys
from pathlib import Path

import can
import pytest

import fieldhub

XL = """
[[channel]]
name = "xl0"
protocol = "canxl"
"""


@pytest.mark.fieldhub_config(XL)
def test_a_2048_byte_can_xl_frame_crosses_with_its_header_and_fd_frames_stay_plain_messages(fieldhub_hub):
    a, b = fieldhub_hub.bus("xl0", fd=True), fieldhub_hub.bus("xl0", fd=True)
    data = bytes((i * 7 + 1) & 0xFF for i in range(2048))
    sent = fieldhub.CanXlMessage(
        arbitration_id=0x123, data=data, xl_vcid=0x42, xl_sdt=3, xl_sec=True, xl_acceptance_field=0x12345678
    )
    a.send(sent)
    a.send(can.Message(arbitration_id=0x124, data=b"\x01" * 12, is_fd=True, is_extended_id=False))
    got = b.recv(5)
    assert isinstance(got, fieldhub.CanXlMessage)
    assert (got.arbitration_id, got.dlc, bytes(got.data)) == (0x123, 2048, data)
    assert (got.xl_vcid, got.xl_sdt, got.xl_sec, got.xl_rrs, got.xl_acceptance_field) == (0x42, 3, True, False, 0x12345678)
    assert not (got.is_fd or got.is_extended_id or got.is_remote_frame)
    assert copy.copy(got).equals(got) and copy.deepcopy(got).xl_acceptance_field == 0x12345678
    assert "fieldhub.CanXlMessage(" in repr(got) and "VCID 42" in str(got)
    fd = b.recv(5)
    assert type(fd) is can.Message and fd.is_fd and fd.arbitration_id == 0x124
    a.shutdown()
    b.shutdown()


@pytest.mark.fieldhub_config(XL)
def test_a_can_xl_frame_from_the_rust_cli_reaches_python_and_a_bad_header_is_refused(fieldhub_hub):
    bus = fieldhub_hub.bus("xl0", fd=True)
    cli = Path(sys.executable).parent / "fieldhub"
    subprocess.run([str(cli), "send", "--hub", fieldhub_hub.url, "xl0", "07010#82:05:0000BEEF#A5B6"], check=True)
    got = bus.recv(5)
    assert isinstance(got, fieldhub.CanXlMessage)
    assert (got.arbitration_id, got.xl_vcid, got.xl_sdt, got.xl_rrs, got.xl_acceptance_field) == (0x010, 7, 5, True, 0xBEEF)
    assert bytes(got.data) == b"\xa5\xb6"
    with pytest.raises(ValueError, match="carries 1..=2048 data bytes, got 2049"):
        bus.send(fieldhub.CanXlMessage(arbitration_id=0x1, data=bytes(2049)))
    with pytest.raises(ValueError, match="out of range"):
        bus.send(fieldhub.CanXlMessage(arbitration_id=0x1, data=b"\x01", xl_vcid=256))
    bus.shutdown()
