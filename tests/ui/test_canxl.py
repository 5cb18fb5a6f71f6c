"""CAN XL and raw frames in the trace: a real 2,048-byte CAN XL frame and a
raw frame sent with `fieldhub send` to a real hub's canxl and raw channels,
shown with their own flags, their identifiers as can-utils prints them and
the first 64 bytes of their data with the frame's whole length."""

import subprocess

from conftest import FIELDHUB, Page, RunningHub, screenshot

CHANNELS = """
[hub]
name = "ui-canxl"

[[channel]]
name = "backbone"
protocol = "canxl"
bitrate = 500000
data_bitrate = 2000000
xl_data_bitrate = 10000000

[[channel]]
name = "wire"
protocol = "raw"
"""


def test_a_can_xl_frame_and_a_raw_frame_are_shown_with_their_own_flags_and_length(browser):
    hub = RunningHub(CHANNELS)
    opened = Page(browser, hub)
    page = opened.page
    try:
        # VCID 0x42, priority 0x123; SDT 0x03 with SEC (flags 0x81), AF 0x12345678.
        xl = "42123#81:03:12345678#" + "".join(f"{i % 256:02X}" for i in range(2048))
        for channel, frame in (("backbone", xl), ("wire", "RDEADBEEF#0102")):
            subprocess.run([FIELDHUB, "send", "--hub", hub.url, channel, frame], check=True, timeout=30)

        row = page.wait_for_selector('.trace-row[data-id="42123"]', timeout=5000)
        assert row.get_attribute("class") == "trace-row"
        assert row.query_selector(".c-flags").inner_text() == "XL SEC"
        assert row.query_selector(".c-len").inner_text() == "2048"
        first = " ".join(f"{i:02X}" for i in range(64))
        assert row.query_selector(".c-data").inner_text() == f"{first} … (2048 bytes)"

        raw = page.wait_for_selector('.trace-row[data-id="DEADBEEF"]', timeout=5000)
        assert raw.query_selector(".c-flags").inner_text() == "RAW"
        assert raw.query_selector(".c-data").inner_text() == "01 02"
        screenshot(page, "canxl-raw")
        assert opened.errors == []
    finally:
        opened.close()
        hub.stop()
