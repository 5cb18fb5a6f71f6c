"""The trace, overwrite and send views against a real hub and real clients."""

import http.client
import subprocess
import time
import urllib.error
import urllib.request

import can
import pytest

from conftest import CONFIG, FIELDHUB, Page, RunningHub


def test_the_page_loads_with_the_hubs_channels_and_no_console_errors(page):
    # The `page` fixture fails the test on any console error or uncaught exception.
    options = page.locator("#monitor-channel option").all_inner_texts()
    assert options == ["all channels", "can0", "can1"]
    assert page.inner_text("#hub-name") == "ui-test"


def test_frames_sent_by_a_client_appear_in_the_trace_within_a_second(hub, page):
    with hub.bus("can0", "ecu") as bus:
        sent_at = time.monotonic()
        bus.send(can.Message(arbitration_id=0x123, data=[0xDE, 0xAD, 0xBE, 0xEF], is_extended_id=False))
        row = page.wait_for_selector('.trace-row[data-id="123"]', timeout=1000)
        assert time.monotonic() - sent_at < 1.0
        assert "DE AD BE EF" in row.inner_text()
        page.wait_for_function(
            "document.querySelector('.trace-row[data-id=\"123\"] .c-sender').textContent === 'ecu'", timeout=3000)
        bus.send(can.Message(arbitration_id=0x1ABCDEF0, data=[1], is_extended_id=True))
        row = page.wait_for_selector('.trace-row[data-id="1ABCDEF0"]', timeout=1000)
        assert "EXT" in row.inner_text()
    with hub.bus("can1", "fd-ecu", fd=True) as fd:
        fd.send(can.Message(arbitration_id=0x7A, data=bytes(range(12)), is_fd=True, bitrate_switch=True,
                            is_extended_id=False))
        row = page.wait_for_selector('.trace-row[data-id="07A"]', timeout=1000)
        assert row.query_selector(".c-flags").inner_text() == "FD BRS"
        assert row.query_selector(".c-len").inner_text() == "12"
        assert row.query_selector(".c-ch").inner_text() == "can1"


def test_ports_that_sent_and_left_between_two_polls_keep_their_names(hub, page):
    # Five cansend-like runs of `fieldhub send`, each a port opened, one
    # frame confirmed and the port gone, one after the other: well under
    # the page's one-second poll each, so most are in no poll's port list;
    # they are named by the hub's memory of departed ports, carried by the
    # trace's batches.
    for i in range(5):
        subprocess.run([FIELDHUB, "send", "--hub", hub.url, "--port", f"visitor-{i}", "can0", f"30{i}#0{i}"],
                       check=True, timeout=30)
    live = [port["name"] for port in hub.api("GET", "/api/v1/ports")]
    assert not any(name.startswith("visitor-") for name in live), "all five have left"
    for i in range(5):
        page.wait_for_function(
            f"document.querySelector('.trace-row[data-id=\"30{i}\"] .c-sender')?.textContent === 'visitor-{i}'",
            timeout=3000)


def test_the_trace_filters_pauses_clears_and_exports_a_candump_log(hub, page):
    with hub.bus("can0", "ecu") as bus:
        for ident in (0x100, 0x101, 0x200):
            bus.send(can.Message(arbitration_id=ident, data=[ident & 0xFF], is_extended_id=False))
        page.wait_for_selector('.trace-row[data-id="200"]', timeout=1000)
        page.fill("#filter-id", "100")
        page.fill("#filter-mask", "7FE")
        page.wait_for_function("document.querySelectorAll('#trace-rows .trace-row').length === 2")
        assert page.locator("#trace-rows .trace-row").evaluate_all("rows => rows.map(r => r.dataset.id)") == [
            "100", "101"]
        with page.expect_download() as download:
            page.click("#export")
        log = open(download.value.path()).read().splitlines()
        assert [line.split(" ", 1)[1] for line in log] == ["can0 100#00", "can0 101#01"]
        assert all(line.startswith("(") and ")" in line for line in log)
        page.fill("#filter-id", "")
        page.fill("#filter-mask", "")
        page.fill("#filter-text", "200#00")
        page.wait_for_function("document.querySelectorAll('#trace-rows .trace-row').length === 1")
        page.fill("#filter-text", "")
        page.click("#pause")
        bus.send(can.Message(arbitration_id=0x555, data=[], is_extended_id=False))
        page.wait_for_function("Number(document.getElementById('not-drawn').textContent) >= 1")
        assert page.locator('.trace-row[data-id="555"]').count() == 0, "a paused trace draws nothing new"
        page.click("#pause")
        page.click("#clear")
        page.wait_for_function("document.querySelectorAll('#trace-rows .trace-row').length === 0")


def test_the_overwrite_view_counts_100_frames_of_one_id_as_100(hub, page):
    page.click("nav button[data-tab=overwrite]")
    with hub.bus("can0", "ecu") as bus:
        for i in range(100):
            bus.send(can.Message(arbitration_id=0x2A0, data=[0x11, i, 0x33], is_extended_id=False))
            time.sleep(0.002)
        bus.send(can.Message(arbitration_id=0x2A1, data=[7], is_extended_id=False))
        page.wait_for_selector('#overwrite-rows tr[data-id="2A1"]', timeout=2000)
        page.wait_for_function(
            "document.querySelector('#overwrite-rows tr[data-id=\"2A0\"] .o-count').textContent === '100'",
            timeout=2000)
        row = page.locator('#overwrite-rows tr[data-id="2A0"]')
        assert row.locator(".o-data .byte").all_inner_texts() == ["11", "63", "33"]
        changed = row.locator(".byte.changed").all_inner_texts()
        assert changed == ["63"], "only the byte that changed with the last frame is highlighted"
        assert float(row.locator(".o-period").inner_text()) > 0
        assert float(row.locator(".o-jitter").inner_text()) >= 0
        assert page.locator('#overwrite-rows tr[data-id="2A1"] .o-count').inner_text() == "1"
        assert page.locator('#overwrite-rows tr[data-id="2A1"] .o-jitter').inner_text() == "", "one frame: no gaps"
        ids = "rows => rows.map(r => r.dataset.id)"
        page.click('#overwrite-head th[data-sort="count"]')
        # The table is drawn again on the next frame, not at the click.
        page.wait_for_function("[...document.querySelectorAll('#overwrite-rows tr[data-id]')]"
                               ".map(r => r.dataset.id).join() === '2A1,2A0'", timeout=2000)
        assert page.locator("#overwrite-rows tr[data-id]").evaluate_all(ids) == ["2A1", "2A0"]
        page.click('#overwrite-head th[data-sort="count"]')
        page.wait_for_function("document.querySelector('#overwrite-head [aria-sort]').getAttribute('aria-sort')"
                               " === 'descending'")
        page.wait_for_function("[...document.querySelectorAll('#overwrite-rows tr[data-id]')]"
                               ".map(r => r.dataset.id).join() === '2A0,2A1'", timeout=2000)
        assert page.locator("#overwrite-rows tr[data-id]").evaluate_all(ids) == ["2A0", "2A1"]


def test_the_trace_shows_time_absolute_relative_and_to_the_same_ids_frame_before_and_sorts_by_any_column(hub, page):
    with hub.bus("can0", "ecu") as bus, hub.bus("can1", "other") as other:
        bus.send(can.Message(arbitration_id=0x300, data=[1], is_extended_id=False))
        time.sleep(0.05)
        other.send(can.Message(arbitration_id=0x200, data=[2], is_extended_id=False))
        time.sleep(0.05)
        bus.send(can.Message(arbitration_id=0x300, data=[3], is_extended_id=False))
        page.wait_for_function("document.querySelectorAll('#trace-rows .trace-row').length === 3")
    times = "rows => rows.map(r => r.querySelector('.c-time').textContent)"
    absolute = page.locator("#trace-rows .trace-row").evaluate_all(times)
    us = [int(t.replace(".", "")) for t in absolute]
    page.select_option("#time-mode", "rel")
    page.wait_for_function("document.querySelector('#trace-rows .c-time').textContent === '0.000000'")
    relative = page.locator("#trace-rows .trace-row").evaluate_all(times)
    assert relative == [f"{(t - us[0]) // 10**6}.{(t - us[0]) % 10**6:06d}" for t in us]
    page.select_option("#time-mode", "id")
    page.wait_for_function("document.querySelector('#trace-rows .c-time').textContent === 'first'")
    same_id = page.locator("#trace-rows .trace-row").evaluate_all(times)
    assert same_id == ["first", "first", f"+{(us[2] - us[0]) / 1000:.3f} ms"], "the gap to 300's frame before"
    page.select_option("#time-mode", "delta")
    page.wait_for_function("document.querySelector('#trace-rows .c-time').textContent === '+0.000 ms'")
    assert page.locator("#trace-rows .trace-row").evaluate_all(times)[2] == f"+{(us[2] - us[1]) / 1000:.3f} ms"
    # A colour per channel.
    colours = page.locator("#trace-rows .c-ch").evaluate_all("cells => cells.map(c => c.style.borderLeftColor)")
    assert colours[0] == colours[2] != colours[1]
    ids = "rows => rows.map(r => r.dataset.id)"
    page.click('#trace-head [data-sort="id"]')
    page.wait_for_function("document.querySelector('#trace-rows .trace-row').dataset.id === '200'")
    assert page.locator("#trace-rows .trace-row").evaluate_all(ids) == ["200", "300", "300"]
    page.click('#trace-head [data-sort="id"]')
    page.wait_for_function("document.querySelector('#trace-rows .trace-row').dataset.id === '300'")
    assert page.locator("#trace-rows .trace-row").evaluate_all(ids) == ["300", "300", "200"]
    page.click('#trace-head [data-sort="ch"]')
    page.wait_for_function("document.querySelector('#trace-rows .trace-row .c-ch').textContent === 'can0'")
    assert page.locator("#trace-rows .c-ch").all_inner_texts() == ["can0", "can0", "can1"]



def test_a_frame_sent_from_the_page_reaches_a_client_once_and_periodically(hub, page):
    with hub.bus("can1", "listener") as bus:
        page.select_option("#send-form select[name=channel]", "can1")
        page.fill("#send-form input[name=frame]", "321#CAFE")
        page.click("#send-form button[type=submit]")
        got = bus.recv(timeout=2)
        assert got is not None and got.arbitration_id == 0x321 and bytes(got.data) == b"\xca\xfe"
        page.fill("#send-form input[name=frame]", "18DAF110#0102")
        page.fill("#send-form input[name=period]", "20")
        page.click("#send-periodic")
        frames = [bus.recv(timeout=2) for _ in range(5)]
        assert all(f is not None and f.arbitration_id == 0x18DAF110 and f.is_extended_id for f in frames)
        # A second job at once; each is listed and stops from its own button.
        page.fill("#send-form input[name=frame]", "2A0#01")
        page.fill("#send-form input[name=period]", "30")
        page.click("#send-periodic")
        jobs = page.locator("#send-jobs li")
        assert jobs.evaluate_all("items => items.map(i => i.dataset.frame)") == ["18DAF110#0102", "2A0#01"]
        ids = set()
        for _ in range(100):
            ids.add(bus.recv(timeout=2).arbitration_id)
            if ids == {0x18DAF110, 0x2A0}:
                break
        assert ids == {0x18DAF110, 0x2A0}, "both jobs send"
        page.click('#send-jobs li[data-frame="18DAF110#0102"] button[data-action=stop]')
        page.wait_for_function("document.querySelectorAll('#send-jobs li').length === 1")
        page.wait_for_function("Number(document.querySelector('#send-jobs .job-count').textContent) >= 3")
        # What was sent before the stop is still queued for the listener.
        while bus.recv(timeout=0) is not None:
            pass
        assert {bus.recv(timeout=2).arbitration_id for _ in range(4)} == {0x2A0}, "the stopped job sends no more"
        page.click('#send-jobs li[data-frame="2A0#01"] button[data-action=stop]')
        page.wait_for_function("document.querySelectorAll('#send-jobs li').length === 0")
        page.fill("#send-form input[name=frame]", "not a frame")
        page.click("#send-form button[type=submit]")
        page.wait_for_selector("#message.error")
        assert "cansend" in page.inner_text("#message")
        # The browser logs the refused request itself; that one is expected.
        page.expected_errors.append("400 (Bad Request)")


def test_with_a_token_the_page_works_when_opened_with_it_and_the_api_refuses_without(browser):
    hub = RunningHub(CONFIG, token="s3cret/+token")
    try:
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(hub.http + "/api/v1/monitor", timeout=5)
        assert refused.value.code == 401
        opened = Page(browser, hub, "?token=s3cret%2F%2Btoken")
        try:
            with hub.bus("can0", "ecu") as bus:
                bus.send(can.Message(arbitration_id=0x7E0, data=[2, 1, 0], is_extended_id=False))
                opened.page.wait_for_selector('.trace-row[data-id="7E0"]', timeout=1000)
                # The control API's requests carry the token too.
                opened.page.click("nav button[data-tab=wiring]")
                opened.page.click('#port-rows tr[data-port="ecu"] button[data-action=unplug]')
                opened.page.wait_for_selector('#port-rows tr[data-port="ecu"] button[data-action=plug]')
                assert hub.api("GET", "/api/v1/ports")[0]["plugged"] is False
            assert opened.errors == []
        finally:
            opened.close()
    finally:
        hub.stop()


def test_another_sites_page_cannot_open_the_monitor(hub):
    # WebSockets are not held to the same-origin policy; the hub checks Origin.
    upgrade = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
               "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
    host = hub.http.removeprefix("http://")
    port = host.rsplit(":", 1)[1]
    statuses = {}
    # Another site; this hub's page; a site whose name was rebound to 127.0.0.1.
    for origin, named in (("https://evil.example", host), (f"http://{host}", host),
                          (f"http://rebound.example:{port}", f"rebound.example:{port}")):
        connection = http.client.HTTPConnection(host, timeout=5)
        connection.request("GET", "/api/v1/monitor", headers={**upgrade, "Origin": origin, "Host": named})
        statuses[origin] = connection.getresponse().status
        connection.close()
    assert statuses == {"https://evil.example": 403, f"http://{host}": 101, f"http://rebound.example:{port}": 403}
