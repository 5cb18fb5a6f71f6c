"""The rest-bus panel: a simulation `fieldhub rbs` started on the
repository's example DBC is listed with its messages and their signals as
last sent; a signal set from the page reaches the bus — a real client
(`fieldhub dump`) receives the message and python cantools decodes the new
value with the same DBC — and a message stopped from the page stops. The
alive counter and the checksum are marked with their rules, and their
faults (a stuck counter, a wrong checksum) switched from the page reach the
bus. For the monitor token the panel shows the values with its controls
disabled."""

import os
import subprocess
from pathlib import Path

import cantools

from conftest import CONFIG, FIELDHUB, Page, RunningHub, screenshot

BODY_DBC = Path(__file__).resolve().parents[2] / "crates" / "fieldhub-rbs" / "tests" / "data" / "body.dbc"


def engine_status(hub, count):
    """The next `count` EngineStatus frames (id 0x100 on can0) as `fieldhub
    dump` receives them and cantools decodes them."""
    frames = subprocess.run([FIELDHUB, "dump", "--hub", hub.url, "-L", "-n", str(count), "can0,100:7FF"],
                            capture_output=True, text=True, timeout=20, check=True).stdout.split()
    db = cantools.database.load_file(str(BODY_DBC))
    data = [line.split("#")[1] for line in frames if "#" in line]
    return [db.decode_message(0x100, bytes.fromhex(d)) for d in data]


def rpms(hub, count):
    """EngineStatus's Rpm in the next `count` frames."""
    return [frame["Rpm"] for frame in engine_status(hub, count)]


def simulate(hub, env=None):
    """`fieldhub rbs` on the example DBC: every node but the device under test."""
    return subprocess.Popen([FIELDHUB, "rbs", "--hub", hub.url, "--channel", "can0", "--except", "DUT",
                             "--counter", "EngineStatus.Counter=0..14",
                             "--checksum", "EngineStatus.Checksum=crc8-sae-j1850", str(BODY_DBC)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)


def test_a_signal_set_from_the_rest_bus_panel_is_on_the_bus_and_a_stopped_message_stops(hub, page):
    rbs = simulate(hub)
    try:
        page.click("nav button[data-tab=rbs]")
        engine = '#rbs-sims tr[data-message="EngineStatus"]'
        page.wait_for_selector(engine, timeout=15_000)
        names = page.locator("#rbs-sims tr[data-message]").evaluate_all("rows => rows.map(r => r.dataset.message)")
        assert names == ["EngineStatus", "BodyMux", "BodyEvent"], "the simulated nodes' messages, in the DBC's order"

        def value(signal):
            return page.inner_text(f'{engine} .rbs-signal[data-signal="{signal}"] .rbs-value')

        assert value("Rpm") == "800", "the start value: raw 3200 x 0.25 rpm"
        assert value("CoolantTemp") == "90"
        assert rpms(hub, 2) == [800, 800]

        page.fill(f'{engine} input[data-signal="Rpm"]', "2000")
        page.click(f"{engine} button[data-action=set]")
        page.wait_for_function(f"document.querySelector('{engine} .rbs-signal[data-signal=Rpm] .rbs-value')"
                               ".textContent === '2000'")
        assert page.input_value(f'{engine} input[data-signal="Rpm"]') == ""
        seen = rpms(hub, 3)
        assert seen[1:] == [2000, 2000], f"the message's next cycles carry the new value: {seen}"
        assert next(m for m in hub.api("GET", "/api/v1/rbs")[0]["messages"]
                    if m["name"] == "EngineStatus")["signals"]["Rpm"] == 2000
        screenshot(page, "rest-bus")

        page.click(f"{engine} button[data-action=toggle]")
        page.wait_for_selector(f'{engine}[data-enabled="false"]')
        assert page.inner_text(f"{engine} button[data-action=toggle]") == "Start"
        stopped = next(m for m in hub.api("GET", "/api/v1/rbs")[0]["messages"] if m["name"] == "EngineStatus")
        assert stopped["enabled"] is False
        quiet = subprocess.run([FIELDHUB, "dump", "--hub", hub.url, "-L", "-T", "300", "can0,100:7FF"],
                               capture_output=True, text=True, timeout=20, check=True).stdout
        assert quiet == "", "a stopped message is not sent"
        page.click(f"{engine} button[data-action=toggle]")
        page.wait_for_selector(f'{engine}[data-enabled="true"]')
        assert rpms(hub, 1) == [2000]

        page.expected_errors.append("400")
        page.fill(f'{engine} input[data-signal="Rpm"]', "99999")
        page.click(f"{engine} button[data-action=set]")
        page.wait_for_selector("#message.error")
        assert "Rpm" in page.inner_text("#message")
    finally:
        rbs.terminate()
        rbs.wait(10)


def test_the_counter_and_checksum_show_their_rules_and_their_faults_from_the_page_reach_the_bus(hub, page):
    rbs = simulate(hub)
    try:
        page.click("nav button[data-tab=rbs]")
        engine = '#rbs-sims tr[data-message="EngineStatus"]'
        page.wait_for_selector(engine, timeout=15_000)
        counter = f'{engine} .rbs-signal[data-signal="Counter"]'
        checksum = f'{engine} .rbs-signal[data-signal="Checksum"]'
        assert page.get_attribute(counter, "data-role") == "counter"
        assert page.inner_text(f"{counter} .rbs-rule") == "counter 0..14", "the range fieldhub rbs --counter gave"
        assert page.get_attribute(checksum, "data-role") == "checksum"
        assert page.inner_text(f"{checksum} .rbs-rule") == "checksum crc8-sae-j1850"
        assert page.locator(f"{counter} input, {checksum} input").count() == 0, "computed signals are not set"
        assert page.get_attribute(f'{engine} .rbs-signal[data-signal="Rpm"]', "data-role") is None
        listed = next(m for m in hub.api("GET", "/api/v1/rbs")[0]["messages"] if m["name"] == "EngineStatus")
        assert listed["counter"] == {"signal": "Counter", "min": 0, "max": 14}
        assert listed["checksum"] == {"signal": "Checksum", "algorithm": "crc8-sae-j1850", "data_id": None}
        assert next(m for m in hub.api("GET", "/api/v1/rbs")[0]["messages"] if m["name"] == "BodyMux")[
            "counter"] is None, "a message without a rule has none"

        page.click(f"{engine} button[data-action=counter]")
        page.wait_for_selector(f'{engine}[data-counter="true"]')
        assert page.inner_text(f"{engine} button[data-action=counter]") == "Run counter"
        stuck = engine_status(hub, 4)[1:]
        assert len({f["Counter"] for f in stuck}) == 1, f"a stuck counter repeats its value: {stuck}"
        assert len({f["Checksum"] for f in stuck}) == 1, "the same payload, the same checksum"
        right = stuck[-1]["Checksum"]

        page.click(f"{engine} button[data-action=checksum]")
        page.wait_for_selector(f'{engine}[data-checksum="true"]')
        assert page.inner_text(f"{engine} button[data-action=checksum]") == "Right checksum"
        wrong = engine_status(hub, 3)[1:]
        assert all(f["Checksum"] != right and f["Counter"] == stuck[-1]["Counter"] for f in wrong), \
            f"the same payload with a checksum other than its right one {right}: {wrong}"
        screenshot(page, "rest-bus-faults")

        page.click(f"{engine} button[data-action=checksum]")
        page.click(f"{engine} button[data-action=counter]")
        page.wait_for_selector(f'{engine}[data-counter="false"][data-checksum="false"]')
        running = [f["Counter"] for f in engine_status(hub, 4)[1:]]
        assert all((b - a) % 15 == 1 for a, b in zip(running, running[1:])), f"counting again: {running}"
    finally:
        rbs.terminate()
        rbs.wait(10)


def test_without_a_simulation_the_rest_bus_panel_says_how_to_start_one(page):
    page.click("nav button[data-tab=rbs]")
    page.wait_for_selector("#rbs-sims p.hint")
    assert "fieldhub rbs FILE.dbc" in page.inner_text("#rbs-sims")


def test_for_the_monitor_token_the_rest_bus_controls_are_disabled_and_say_why(browser):
    config = CONFIG.replace('name = "ui-test"', 'name = "ui-test"\ntoken = "full-token"\nmonitor_token = "look-only"')
    hub = RunningHub(config, token="full-token")
    rbs = simulate(hub, env={**os.environ, "FIELDHUB_TOKEN": "full-token"})
    try:
        opened = Page(browser, hub, "?token=look-only")
        try:
            page = opened.page
            page.click("nav button[data-tab=rbs]")
            page.wait_for_selector('#rbs-sims tr[data-message="EngineStatus"]', timeout=15_000)
            assert "the monitor token may not control the hub" in page.inner_text("#rbs-no-control")
            for control in page.query_selector_all("#rbs-sims button, #rbs-sims input"):
                assert control.is_disabled()
            assert page.inner_text('tr[data-message="EngineStatus"] [data-signal="Rpm"] .rbs-value') == "800"
            assert opened.errors == []
        finally:
            opened.close()
    finally:
        rbs.terminate()
        rbs.wait(10)
        hub.stop()
