"""LIN frames the hub makes, marked in the trace: a real collision of two
real clients' responses to an event-triggered header on a real hub's LIN
channel (virtual time, so the schedule is the same on every run), and the
headers nobody answered."""

import subprocess

from conftest import FIELDHUB, Page, RunningHub, screenshot

#: docs/buses.md's event-triggered cluster: DoorEvents (0x30) carries the
#: left door's 0x11 and the right door's 0x12; 0x20 is nobody's here.
EVENTS = """
[hub]
name = "ui-lin"
time = "virtual"

[[channel]]
name = "doors"
protocol = "lin"
bitrate = 19200
timing = "timed"

[channel.lin]
schedule = [{ id = 0x30, delay_ms = 10 }, { id = 0x20, delay_ms = 10 }]

[[channel.lin.event_triggered]]
name = "DoorEvents"
id = 0x30
frames = [0x11, 0x12]
"""


def test_a_lin_collision_and_unanswered_headers_are_marked_not_shown_as_ordinary_frames(browser):
    hub = RunningHub(EVENTS)
    opened = Page(browser, hub)
    page = opened.page
    try:
        # The dump's port starts the schedule at bus time 0 and keeps it running.
        dump = subprocess.Popen([FIELDHUB, "dump", "--hub", hub.url, "-n", "6", "doors"],
                                stdout=subprocess.PIPE, text=True)
        page.wait_for_function("fetch('/api/v1/ports').then(r => r.json()).then(p => p.length === 1)",
                               timeout=10_000)
        # Both doors report a change: their answers to the next 0x30 header collide.
        for port, frame in (("left", "L11#1101"), ("right", "L12#9202")):
            subprocess.run([FIELDHUB, "send", "--hub", hub.url, "--port", port, "doors", frame],
                           check=True, timeout=30)
        hub.api("POST", "/api/v1/time", {"action": "run_until", "until_ns": 60_000_000})
        out, _ = dump.communicate(timeout=30)
        assert hub.api("GET", "/api/v1/channels")[0]["collisions"] == 1, out

        collision = page.wait_for_selector(".trace-row.lin-collision", timeout=5000)
        # What the bus read: 0x11 01 AND 0x92 02 = 10 00, each response's checksum ANDed.
        assert collision.get_attribute("data-id") == "030"
        assert collision.query_selector(".c-flags").inner_text() == "LIN COLLISION"
        assert collision.query_selector(".c-data").inner_text() == "collision, read 10 00"
        assert collision.query_selector(".c-sender").inner_text() != "left"
        unanswered = page.locator(".trace-row.lin-no-response")
        assert unanswered.count() >= 2, "the first 0x30 and 0x20 headers went out alone"
        assert set(unanswered.evaluate_all("rows => rows.map(r => r.querySelector('.c-data').textContent)")) == {
            "no response"}
        assert set(unanswered.evaluate_all("rows => rows.map(r => r.querySelector('.c-flags').textContent)")) == {
            "LIN NO RESPONSE"}
        # The collision-resolving schedule's answers are ordinary frames.
        for ident, data in (("011", "11 01"), ("012", "92 02")):
            row = page.wait_for_selector(f'.trace-row[data-id="{ident}"]', timeout=5000)
            assert row.get_attribute("class") == "trace-row"
            assert row.query_selector(".c-flags").inner_text() == "LIN"
            assert row.query_selector(".c-data").inner_text() == data
        screenshot(page, "lin-collision")
        assert opened.errors == []
    finally:
        opened.close()
        hub.stop()


#: Two slots at 19.2 kbit/s, in virtual time: the master's go-to-sleep and a
#: slave's wake-up pulse (docs/buses.md, Sleep and wake-up).
SLEEP = """
[hub]
name = "ui-lin-sleep"
time = "virtual"

[[channel]]
name = "body"
protocol = "lin"
bitrate = 19200
timing = "timed"

[channel.lin]
schedule = [{ id = 0x10, delay_ms = 10 }, { id = 0x11, delay_ms = 10 }]
"""


def test_the_go_to_sleep_command_and_a_wake_up_pulse_are_marked_in_the_trace(browser):
    hub = RunningHub(SLEEP)
    opened = Page(browser, hub)
    page = opened.page
    try:
        # The dump's port starts the schedule at bus time 0.
        dump = subprocess.Popen([FIELDHUB, "dump", "--hub", hub.url, "-n", "4", "body"],
                                stdout=subprocess.PIPE, text=True)
        page.wait_for_function("fetch('/api/v1/ports').then(r => r.json()).then(p => p.length === 1)",
                               timeout=10_000)
        hub.api("POST", "/api/v1/channels/body/lin/sleep")
        hub.api("POST", "/api/v1/time", {"action": "run_until", "until_ns": 1_000_000_000})
        subprocess.run([FIELDHUB, "send", "--hub", hub.url, "--port", "door", "body", "LW#-"],
                       check=True, timeout=30)
        hub.api("POST", "/api/v1/time", {"action": "run_until", "until_ns": 1_105_000_000})
        out, _ = dump.communicate(timeout=30)
        assert hub.api("GET", "/api/v1/channels")[0]["wake_ups"] == 1, out

        sleep = page.wait_for_selector(".trace-row.lin-go-to-sleep", timeout=5000)
        assert sleep.get_attribute("data-id") == "03C"
        assert sleep.query_selector(".c-flags").inner_text() == "LIN GO-TO-SLEEP"
        assert sleep.query_selector(".c-data").inner_text() == "go-to-sleep: 00 FF FF FF FF FF FF FF"
        pulse = page.wait_for_selector(".trace-row.lin-wake-up", timeout=5000)
        assert pulse.query_selector(".c-flags").inner_text() == "LIN WAKE-UP"
        assert pulse.query_selector(".c-data").inner_text() == "wake-up pulse"
        assert pulse.query_selector(".c-sender").inner_text() == "door"
        screenshot(page, "lin-sleep")
        assert opened.errors == []
    finally:
        opened.close()
        hub.stop()
