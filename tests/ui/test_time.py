"""Bus time in the page: a hub in virtual time shows its bus time and
real-time factor, and the page pauses it, steps it by a length, runs it to a
time and resumes it — with a real participant of virtual time sending a
numbered frame every millisecond of bus time, whose frames the trace shows
step by step at their bus times. On a real-time hub the panel stays hidden;
for an access that may not control the hub its buttons are disabled and it
says why."""

import threading
import time

import can

from conftest import CONFIG, Page, RunningHub, screenshot

VIRTUAL = CONFIG.replace('name = "ui-test"', 'name = "ui-test"\ntime = "virtual"')
ROWS = "rows => rows.map(r => [r.querySelector('.c-time').textContent, r.querySelector('.c-data').textContent])"


def numbered(n: int) -> str:
    """Frame n's data as the trace shows it: n in two bytes."""
    return f"{n >> 8:02X} {n & 0xFF:02X}"


class Participant:
    """A synchronised python-can bus (a participant of virtual time) that
    sends frame n on can0 at bus time n ms, one 1 ms step after another,
    until the hub goes away."""

    def __init__(self, hub: RunningHub):
        self.bus = hub.bus("can0", "ecu", synchronized=True)
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        n = 0
        try:
            while True:
                self.bus.send(can.Message(arbitration_id=0x100, data=n.to_bytes(2, "big"), is_extended_id=False))
                self.bus.step(0.001)
                n += 1
        except can.CanError:
            pass  # the hub stopped: the test is over

    def close(self):
        self.bus.shutdown()
        self.thread.join(5)


def wait_for_participant(hub: RunningHub, done_until_ns: int):
    """Until the one participant has joined and ended its step at `done_until_ns`."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        participants = hub.api("GET", "/api/v1/time")["participants"]
        if [p["done_until_ns"] for p in participants] == [done_until_ns]:
            return
        time.sleep(0.02)
    raise AssertionError(f"the participant did not reach {done_until_ns} ns: {participants}")


def test_stepping_bus_time_from_the_page_shows_exactly_that_steps_frames_at_their_bus_times(browser):
    hub = RunningHub(VIRTUAL)
    participant = None
    try:
        opened = Page(browser, hub)
        page = opened.page
        try:
            page.wait_for_selector("#bus-time:not([hidden])")
            page.click('#bus-time button[data-time="pause"]')
            page.wait_for_function("document.getElementById('bus-state').dataset.state === 'paused'")
            participant = Participant(hub)
            wait_for_participant(hub, 1_000_000)

            page.fill("#bus-step", "10")
            page.click('#bus-time button[data-time="step"]')
            page.wait_for_function("document.getElementById('bus-now').textContent === '0.010000'")
            page.wait_for_function("document.querySelectorAll('#trace-rows .trace-row').length === 10")
            rows = page.locator("#trace-rows .trace-row").evaluate_all(ROWS)
            assert rows == [[f"0.{n * 1000:06d}", numbered(n)] for n in range(10)], "frames 0-9 at 0-9 ms"
            assert page.locator("#trace-rows .c-sender").all_inner_texts() == ["ecu"] * 10
            assert page.get_attribute("#bus-state", "data-state") == "paused"

            # The next step, from a cleared trace: exactly its ten frames.
            page.click("#clear")
            page.wait_for_function("document.querySelectorAll('#trace-rows .trace-row').length === 0")
            wait_for_participant(hub, 11_000_000)
            page.click('#bus-time button[data-time="step"]')
            page.wait_for_function("document.getElementById('bus-now').textContent === '0.020000'")
            page.wait_for_function("document.querySelectorAll('#trace-rows .trace-row').length === 10")
            rows = page.locator("#trace-rows .trace-row").evaluate_all(ROWS)
            assert rows == [[f"0.{n * 1000:06d}", numbered(n)] for n in range(10, 20)], "frames 10-19"
            assert hub.api("GET", "/api/v1/time")["now_ns"] == 20_000_000
            screenshot(page, "bus-time")

            # Run until a time between two of the participant's boundaries.
            page.fill("#bus-until", "0.0425")
            page.click('#bus-time button[data-time="run_until"]')
            page.wait_for_function("document.getElementById('bus-now').textContent === '0.042500'")
            status = hub.api("GET", "/api/v1/time")
            assert status["now_ns"] == 42_500_000, "bus time stands at the target"
            assert status["limit"]["state"] == "paused"
            page.wait_for_function("document.querySelectorAll('#trace-rows .trace-row').length === 33")
            last = page.locator("#trace-rows .trace-row").last.evaluate("r => [r.querySelector('.c-time').textContent,"
                                                                      " r.querySelector('.c-data').textContent]")
            assert last == ["0.042000", numbered(42)]
            assert page.inner_text("#bus-factor").endswith("×")

            page.click('#bus-time button[data-time="resume"]')
            page.wait_for_function("document.getElementById('bus-state').dataset.state === 'running'")
            page.fill("#bus-until", "soon")
            page.click('#bus-time button[data-time="run_until"]')
            page.wait_for_selector("#message.error")
            assert "seconds" in page.inner_text("#message")
            page.fill("#bus-step", "-1")
            page.click('#bus-time button[data-time="step"]')
            page.wait_for_function("document.getElementById('message').textContent.includes('milliseconds')")
            assert opened.errors == []
        finally:
            opened.close()
    finally:
        hub.stop()
        if participant:
            participant.close()


def test_for_the_monitor_token_the_time_buttons_are_disabled_and_say_why(browser):
    config = VIRTUAL.replace('time = "virtual"', 'time = "virtual"\ntoken = "full-token"\nmonitor_token = "look-only"')
    hub = RunningHub(config, token="full-token")
    try:
        opened = Page(browser, hub, "?token=look-only")
        page = opened.page
        try:
            page.wait_for_selector("#bus-time:not([hidden])")
            page.wait_for_selector("#bus-no-control:not([hidden])")
            assert "the monitor token may not control the hub" in page.inner_text("#bus-no-control")
            for action in ("pause", "resume", "step", "run_until"):
                assert page.is_disabled(f'#bus-time button[data-time="{action}"]')
            assert page.inner_text("#bus-now") == "0.000000"
            assert opened.errors == []
        finally:
            opened.close()
    finally:
        hub.stop()


def test_on_a_real_time_hub_the_bus_time_panel_stays_hidden(page):
    # The page is ready after its first poll, which read the hub's time.
    assert page.locator("#bus-time").is_hidden()
