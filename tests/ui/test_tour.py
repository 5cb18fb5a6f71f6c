"""A bench session as a new user would have it — three ECUs, a DBC, a bridge,
a fault rule, a cut, periodic traffic from the page — checked on the page
and by the clients, with the screenshots docs/monitor.md shows."""

import time

import can
import cantools

from conftest import screenshot

DBC = """VERSION ""

NS_ :

BS_:

BU_: ECU

BO_ 256 Engine: 8 ECU
 SG_ Speed : 0|16@1+ (0.1,0) [0|6553.5] "km/h" Vector__XXX
 SG_ Temp : 16|8@1- (1,-40) [-168|87] "degC" Vector__XXX
 SG_ Gear : 24|4@1+ (1,0) [0|15] "" Vector__XXX

VAL_ 256 Gear 0 "Neutral" 1 "First" 2 "Second" 3 "Third" ;
"""


def engine_frame(i):
    """Engine's i-th frame: speed rising, temperature wobbling, gear up every 20."""
    speed = 500 + 10 * i
    return bytes([speed & 0xFF, speed >> 8, 0x5A + i % 3, 1 + i // 20, 0, 0, 0, 0])


def test_a_bench_session_on_the_page(hub, page, tmp_path):
    (tmp_path / "car.dbc").write_text(DBC)
    page.select_option("#dbc-channel", "can0")
    page.set_input_files("#dbc-file", str(tmp_path / "car.dbc"))
    page.wait_for_function("document.getElementById('dbc-status').textContent.includes('can0')")
    with hub.bus("can0", "engine") as engine, hub.bus("can0", "dash") as dash, \
            hub.bus("can1", "gateway", fd=True) as gateway:
        hub.api("POST", "/api/v1/routes", {"from": "can0", "to": "can1", "id": 0x100, "mask": 0x7FF})
        hub.api("POST", "/api/v1/faults", {"channel": "can0", "at": "bus", "id": 0x3C0, "mask": 0x7FF,
                                           "action": {"type": "drop"}, "probability": 0.5, "seed": 7})
        page.fill("#send-form input[name=frame]", "3C0#A5")
        page.fill("#send-form input[name=period]", "50")
        page.click("#send-periodic")
        for i in range(60):
            engine.send(can.Message(arbitration_id=0x100, is_extended_id=False, data=engine_frame(i)))
            dash.send(can.Message(arbitration_id=0x18FF0010, is_extended_id=True, data=[i, 0xC8]))
            time.sleep(0.05)
        page.click('#send-jobs li[data-frame="3C0#A5"] button[data-action=stop]')
        gateway_ids = {m.arbitration_id for m in iter(lambda: gateway.recv(timeout=0.2), None)}
        assert gateway_ids == {0x100}, "the bridge carries Engine, and only Engine, to can1"
        last = engine_frame(59)
        values = cantools.database.load_string(DBC, database_format="dbc").decode_message(0x100, last)
        want = f"Engine: Speed={values['Speed']:.1f} km/h Temp={values['Temp']:.0f} degC " \
               f"Gear={values['Gear'].value} ({values['Gear'].name})"
        row = page.locator('.trace-row[data-id="100"][data-channel="can0"]').last
        assert row.locator(".c-decoded").inner_text() == want
        assert row.locator(".c-data").inner_text().replace(" ", "") == last.hex().upper()
        assert row.locator(".c-sender").inner_text() == "engine"
        assert page.locator('.trace-row[data-id="3C0"] .c-sender').last.inner_text() == "send port"
        screenshot(page, "trace")
        page.click("nav button[data-tab=overwrite]")
        page.wait_for_selector('#overwrite-rows tr[data-id="18FF0010"]')
        assert page.inner_text('#overwrite-rows tr[data-id="100"][data-channel="can0"] .o-count') == "60"
        screenshot(page, "overwrite")
        page.click("nav button[data-tab=load]")
        page.wait_for_selector('#error-rows tr[data-port="engine"]')
        screenshot(page, "load")
        page.click("nav button[data-tab=wiring]")
        page.check('#port-rows tr[data-port="dash"] input.cut-choice')
        page.click('#channel-rows tr[data-channel="can0"] button[data-action=cut]')
        page.wait_for_selector("#wiring-picture line.wire.cut", state="attached")
        page.wait_for_selector("#wiring-picture line.bridge", state="attached")
        applied = int(page.inner_text("#fault-rows .fault-applied"))
        assert 0 < applied < int(page.inner_text("#fault-rows .fault-matched")), "a 50 % rule drops some, not all"
        screenshot(page, "wiring")
