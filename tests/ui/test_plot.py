"""The plot view: DBC signals and raw bits of an id over time, live and over
a recording opened from the page — a candump log, and ASC and BLF files
written by python-can, which the hub reads and decodes; its points are
checked against cantools decoding the frames that were sent or written. A
file the hub cannot read is reported with where its reader stopped; for an
access that may not control the hub, opening one is disabled with the reason."""

import time

import can
import cantools
import pytest

from conftest import CONFIG, Page, RunningHub, screenshot
from test_tour import DBC, engine_frame


def plotted(page):
    """The plot's points as the page exports them: {series: [(time_us, value)]}."""
    with page.expect_download() as download:
        page.click("#plot-export")
    series = {}
    for line in open(download.value.path()).read().splitlines()[1:]:
        label, time_us, value = line.rsplit(",", 2)
        series.setdefault(label.strip('"'), []).append((int(time_us), float(value)))
    return series


def test_plotted_signals_are_the_values_cantools_decodes_from_the_frames_sent(hub, page, tmp_path):
    (tmp_path / "car.dbc").write_text(DBC)
    page.select_option("#dbc-channel", "can0")
    page.set_input_files("#dbc-file", str(tmp_path / "car.dbc"))
    page.wait_for_function("document.getElementById('dbc-status').textContent.includes('can0')")
    page.click("nav button[data-tab=plot]")
    frames = [engine_frame(i) for i in range(40)]
    with hub.bus("can0", "engine") as engine:
        engine.send(can.Message(arbitration_id=0x100, is_extended_id=False, data=frames[0]))
        # The signals of a message are offered once one of its frames came.
        page.wait_for_selector("#plot-signal option:text('can0 Engine.Speed')", state="attached")
        for name in ("Speed", "Temp"):
            page.select_option("#plot-signal", label=f"can0 Engine.{name}")
            page.click("#plot-add-signal")
        page.fill("#plot-raw-id", "100")
        page.fill("#plot-raw-bits", "24:4")
        page.click("#plot-add-raw")
        page.click("#plot-clear")
        for data in frames:
            engine.send(can.Message(arbitration_id=0x100, is_extended_id=False, data=data))
            time.sleep(0.02)
        page.wait_for_function(
            "[...document.querySelectorAll('#plot-series .series-points')].every(p => p.textContent === '40')")
    db = cantools.database.load_string(DBC, database_format="dbc")
    want = [db.decode_message(0x100, data, decode_choices=False) for data in frames]
    points = plotted(page)
    assert [v for _, v in points["can0 Engine.Speed"]] == pytest.approx([w["Speed"] for w in want], rel=1e-12)
    assert [v for _, v in points["can0 Engine.Temp"]] == pytest.approx([w["Temp"] for w in want], rel=1e-12)
    assert [v for _, v in points["100 bits 24:4"]] == [w["Gear"] for w in want], "raw bits: the gear's raw value"
    times = [t for t, _ in points["can0 Engine.Speed"]]
    assert times == sorted(times) and len(set(times)) == 40, "one time axis: the hub's times, one per frame"
    assert page.locator("#plot-chart canvas").count() >= 1, "drawn"
    screenshot(page, "plot")


def test_a_candump_log_opened_from_the_page_is_plotted_as_raw_bits(hub, page, tmp_path):
    log = tmp_path / "drive.log"
    log.write_text("".join(f"(1700000000.{i * 10_000:06d}) can0 100#{engine_frame(i).hex().upper()}\n"
                           for i in range(25)) + "(1700000000.500000) can0 7FF#01\n")
    page.click("nav button[data-tab=plot]")
    page.fill("#plot-raw-id", "100")
    page.fill("#plot-raw-bits", "0:16")
    page.click("#plot-add-raw")
    page.set_input_files("#plot-file", str(log))
    page.wait_for_function("document.querySelector('#plot-series .series-points').textContent === '25'")
    assert "26 frames" in page.inner_text("#message")
    points = plotted(page)["100 bits 0:16"]
    assert points == [(1_700_000_000_000_000 + i * 10_000, 500 + 10 * i) for i in range(25)]


def python_can_recording(path, writer, messages):
    """`messages` written to `path` by python-can's own writer (ASCWriter,
    BLFWriter): a third party's file, not fieldhub's."""
    with writer(str(path)) as out:
        for message in messages:
            out.on_message_received(message)


def test_asc_and_blf_recordings_written_by_python_can_plot_the_values_cantools_decodes(hub, page, tmp_path):
    (tmp_path / "car.dbc").write_text(DBC)
    page.select_option("#dbc-channel", "can0")
    page.set_input_files("#dbc-file", str(tmp_path / "car.dbc"))
    page.wait_for_function("document.getElementById('dbc-status').textContent.includes('can0')")
    page.click("nav button[data-tab=plot]")
    page.select_option("#plot-dbc", "can0")
    # Steps of 1/64 s: times a float holds exactly, so the files' microseconds are exact.
    start = 1_700_000_000.0
    messages = [can.Message(timestamp=start + i / 64, arbitration_id=0x100, is_extended_id=False,
                            data=engine_frame(i), channel=0) for i in range(30)]
    # Another identifier between them: not a point of the Engine series.
    messages.insert(7, can.Message(timestamp=start + 6.5 / 64, arbitration_id=0x7FF, is_extended_id=False,
                                   data=b"\x01", channel=0))
    db = cantools.database.load_string(DBC, database_format="dbc")
    want = [db.decode_message(0x100, engine_frame(i), decode_choices=False) for i in range(30)]
    for name, writer in (("drive.asc", can.ASCWriter), ("drive.blf", can.BLFWriter)):
        python_can_recording(tmp_path / name, writer, messages)
        page.set_input_files("#plot-file", str(tmp_path / name))
        # "plot: reading NAME…" names the file too: wait for what it read.
        page.wait_for_function(
            f"document.getElementById('message').textContent.includes('{name}')"
            " && document.getElementById('message').textContent.includes('frames')")
        assert "31 frames" in page.inner_text("#message"), page.inner_text("#message")
        assert "decoded with can0's DBC" in page.inner_text("#message")
        if not page.locator("#plot-series li").count():
            # The recording's signals are offered as it is opened; a series
            # added now plots the recording already open.
            for signal in ("Speed", "Temp"):
                page.select_option("#plot-signal", label=f"can0 Engine.{signal}")
                page.click("#plot-add-signal")
        page.wait_for_function(
            "[...document.querySelectorAll('#plot-series .series-points')].every(p => p.textContent === '30')")
        points = plotted(page)
        for signal in ("Speed", "Temp"):
            assert [v for _, v in points[f"can0 Engine.{signal}"]] == pytest.approx(
                [w[signal] for w in want], rel=1e-12), f"{name}: {signal}"
        times = [t - points["can0 Engine.Speed"][0][0] for t, _ in points["can0 Engine.Speed"]]
        assert times == [i * 15_625 for i in range(30)], f"{name}: the recording's own times"
    screenshot(page, "plot-recording")


def test_a_broken_recording_opened_from_the_page_shows_where_the_hubs_reader_stopped(hub, page, tmp_path):
    page.expected_errors.append("400 (Bad Request)")
    blf = tmp_path / "broken.blf"
    python_can_recording(blf, can.BLFWriter, [can.Message(timestamp=1.0 + i, arbitration_id=i, data=b"\x00" * 8)
                                              for i in range(50)])
    blf.write_bytes(blf.read_bytes()[:-30])
    page.click("nav button[data-tab=plot]")
    page.set_input_files("#plot-file", str(blf))
    page.wait_for_selector("#message.error")
    assert "broken.blf: not a readable blf recording: BLF at byte " in page.inner_text("#message")


def test_for_the_monitor_token_opening_a_recording_is_disabled_and_says_why(browser, tmp_path):
    config = CONFIG.replace('name = "ui-test"', 'name = "ui-test"\ntoken = "full-token"\nmonitor_token = "look-only"')
    hub = RunningHub(config, token="full-token")
    try:
        opened = Page(browser, hub, "?token=look-only")
        try:
            page = opened.page
            page.click("nav button[data-tab=plot]")
            page.wait_for_selector("#plot-no-control:not([hidden])")
            assert page.is_disabled("#plot-file")
            assert "the monitor token may not control the hub" in page.inner_text("#plot-no-control")
            assert opened.errors == []
        finally:
            opened.close()
        full = Page(browser, hub, "?token=full-token")
        try:
            full.page.click("nav button[data-tab=plot]")
            assert full.page.is_enabled("#plot-file") and full.page.is_hidden("#plot-no-control")
        finally:
            full.close()
    finally:
        hub.stop()
