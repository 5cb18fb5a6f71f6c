"""Send by signals: a message of the channel's DBC composed from signal
values on the page, encoded by the hub, and checked on the bus — a real
client (`fieldhub dump`) receives the frame and python cantools decodes it
with the same DBC to the values typed in."""

import subprocess
import time

import cantools
import pytest

from conftest import FIELDHUB, screenshot
from test_tour import DBC


def load_dbc(page, tmp_path):
    (tmp_path / "car.dbc").write_text(DBC)
    page.select_option("#dbc-channel", "can0")
    page.set_input_files("#dbc-file", str(tmp_path / "car.dbc"))
    page.wait_for_selector("#signal-message option[value=Engine]", state="attached")


def dump(hub, count):
    """`fieldhub dump -L` of can0 until `count` frames came, attached before it returns."""
    before = len(hub.api("GET", "/api/v1/ports"))
    process = subprocess.Popen([FIELDHUB, "dump", "--hub", hub.url, "-L", "-n", str(count), "can0"],
                               stdout=subprocess.PIPE, text=True)
    for _ in range(200):
        if len(hub.api("GET", "/api/v1/ports")) > before:
            return process
        time.sleep(0.05)
    process.kill()
    raise AssertionError("fieldhub dump did not open its port")


def test_a_frame_composed_from_signal_values_decodes_to_them_with_cantools(hub, page, tmp_path):
    load_dbc(page, tmp_path)
    assert page.input_value("#signal-fields input[data-signal=Temp]") == "-40", "raw 0 is -40 degC"
    typed = {"Speed": 88.8, "Temp": -12, "Gear": 3}
    for name, value in typed.items():
        page.fill(f"#signal-fields input[data-signal={name}]", str(value))
    receiver = dump(hub, 1)
    page.click("#signal-send")
    line = receiver.communicate(timeout=10)[0].strip()
    _, channel, frame = line.split(" ")
    ident, data = frame.split("#")
    assert (channel, ident) == ("can0", "100")
    db = cantools.database.load_string(DBC, database_format="dbc")
    decoded = db.decode_message(0x100, bytes.fromhex(data), decode_choices=False)
    assert decoded == pytest.approx(typed, rel=1e-9)
    page.wait_for_function("document.getElementById('message').textContent === 'Engine sent as ' + "
                           f"'100#{data}'")
    page.wait_for_selector(".trace-row[data-id='100']")
    screenshot(page, "send-signals")


def test_a_periodic_signal_job_runs_until_stopped_and_a_value_too_large_is_refused(hub, page, tmp_path):
    load_dbc(page, tmp_path)
    page.fill("#signal-fields input[data-signal=Gear]", "2")
    page.fill("#signal-form input[name=period]", "50")
    receiver = dump(hub, 3)
    page.click("#signal-periodic")
    job = page.wait_for_selector("#send-jobs li[data-frame^=Engine]")
    lines = receiver.communicate(timeout=10)[0].split()
    frames = [line for line in lines if "#" in line]
    db = cantools.database.load_string(DBC, database_format="dbc")
    gears = [db.decode_message(0x100, bytes.fromhex(f.split("#")[1]), decode_choices=False)["Gear"] for f in frames]
    assert gears == [2, 2, 2]
    job.query_selector("button[data-action=stop]").click()
    page.wait_for_selector("#send-jobs li", state="detached")
    page.expected_errors.append("422")
    page.fill("#signal-fields input[data-signal=Temp]", "100")
    page.click("#signal-send")
    page.wait_for_function("document.getElementById('message').textContent.includes('does not fit')")
    assert "from -168 to 87" in page.inner_text("#message"), "the range that fits"
