"""DBC decoding: the page shows what cantools computes for the same frame,
and the Rust decoder's vectors are still cantools' decoding."""

import subprocess
import sys
from pathlib import Path

import can
import cantools

from conftest import CONFIG, Page, RunningHub

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "crates" / "fieldhub-dbc" / "tests"

DBC = """VERSION ""

NS_ :

BS_:

BU_: ECU

BO_ 256 Engine: 8 ECU
 SG_ Speed : 0|16@1+ (0.1,0) [0|6553.5] "km/h" Vector__XXX
 SG_ Temp : 16|8@1- (1,-40) [-168|87] "degC" Vector__XXX
 SG_ Rpm : 31|16@0+ (0.25,0) [0|16383.75] "rpm" Vector__XXX
"""

FRAME = bytes([0xD2, 0x04, 0xF6, 0x1F, 0x40, 0x00, 0x00, 0x00])


def expected_text():
    """The decoded line the page must show, from cantools' values."""
    db = cantools.database.load_string(DBC, database_format="dbc")
    values = db.get_message_by_frame_id(256).decode(FRAME, decode_choices=False)
    return f"Engine: Speed={values['Speed']:.1f} km/h Temp={values['Temp']:.0f} degC Rpm={values['Rpm']:.2f} rpm"


def test_the_rust_decoders_vectors_are_cantools_decoding():
    # tests/cantools.rs checks fieldhub-dbc against vectors.json; this checks
    # vectors.json is what cantools computes today.
    subprocess.run([sys.executable, str(VECTORS / "make_vectors.py"), "--check"], check=True)


def test_an_uploaded_dbc_decodes_the_trace_and_the_overwrite_view(hub, page, tmp_path):
    dbc_file = tmp_path / "engine.dbc"
    dbc_file.write_text(DBC)
    page.select_option("#dbc-channel", "can0")
    page.set_input_files("#dbc-file", str(dbc_file))
    page.wait_for_function("document.getElementById('dbc-status').textContent.includes('can0 (1 messages)')")
    want = expected_text()
    assert want == "Engine: Speed=123.4 km/h Temp=-50 degC Rpm=2000.00 rpm"
    with hub.bus("can0", "ecu") as bus:
        bus.send(can.Message(arbitration_id=0x100, data=FRAME, is_extended_id=False))
        row = page.wait_for_selector('.trace-row[data-id="100"]', timeout=1000)
        assert row.query_selector(".c-decoded").inner_text() == want
        page.click("nav button[data-tab=overwrite]")
        cell = page.wait_for_selector('#overwrite-rows tr[data-id="100"] .o-decoded')
        assert cell.inner_text() == want


def test_a_windows_1252_dbc_keeps_its_units(hub, page, tmp_path):
    # Vector's tools write Windows-1252: the degree sign is one byte, 0xB0.
    dbc_file = tmp_path / "vector.dbc"
    dbc_file.write_bytes(DBC.replace('"degC"', '"\u00b0C"').encode("cp1252"))
    page.select_option("#dbc-channel", "can0")
    page.set_input_files("#dbc-file", str(dbc_file))
    page.wait_for_function("document.getElementById('dbc-status').textContent.includes('can0 (1 messages)')")
    with hub.bus("can0", "ecu") as bus:
        bus.send(can.Message(arbitration_id=0x100, data=FRAME, is_extended_id=False))
        row = page.wait_for_selector('.trace-row[data-id="100"]', timeout=1000)
        assert row.query_selector(".c-decoded").inner_text() == expected_text().replace("degC", "\u00b0C")


def test_a_dbc_named_in_the_configuration_decodes_from_the_start(browser, tmp_path):
    (tmp_path / "engine.dbc").write_text(DBC)
    config = CONFIG.replace('name = "can0"\n', f'name = "can0"\ndbc = "{tmp_path / "engine.dbc"}"\n')
    hub = RunningHub(config)
    try:
        opened = Page(browser, hub)
        try:
            assert "can0 (1 messages)" in opened.page.inner_text("#dbc-status")
            with hub.bus("can0", "ecu") as bus:
                bus.send(can.Message(arbitration_id=0x100, data=FRAME, is_extended_id=False))
                row = opened.page.wait_for_selector('.trace-row[data-id="100"]', timeout=1000)
                assert row.query_selector(".c-decoded").inner_text() == expected_text()
            assert opened.errors == []
        finally:
            opened.close()
    finally:
        hub.stop()
