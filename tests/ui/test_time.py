"""Bus time in the page: a hub in virtual time shows its bus time and
real-time factor, and the page pauses, runs it to a time and resumes it."""

from conftest import CONFIG, Page, RunningHub, screenshot


def test_on_a_virtual_time_hub_the_page_pauses_runs_until_and_resumes_bus_time(browser):
    hub = RunningHub(CONFIG.replace('name = "ui-test"', 'name = "ui-test"\ntime = "virtual"'))
    try:
        opened = Page(browser, hub)
        page = opened.page
        try:
            page.wait_for_selector("#bus-time:not([hidden])")
            page.click('#bus-time button[data-time="pause"]')
            page.wait_for_function("document.getElementById('bus-state').dataset.state === 'paused'")
            page.fill("#bus-until", "2.5")
            page.click('#bus-time button[data-time="run_until"]')
            page.wait_for_function("document.getElementById('bus-now').textContent === '2.500000'")
            status = hub.api("GET", "/api/v1/time")
            assert status["now_ns"] == 2_500_000_000, "the page's run-until reached the hub"
            assert status["limit"]["state"] == "paused"
            assert page.inner_text("#bus-factor").endswith("×")
            screenshot(page, "bus-time")
            page.click('#bus-time button[data-time="resume"]')
            page.wait_for_function("document.getElementById('bus-state').dataset.state === 'running'")
            assert hub.api("GET", "/api/v1/time")["limit"]["state"] == "running"
            page.fill("#bus-until", "soon")
            page.click('#bus-time button[data-time="run_until"]')
            page.wait_for_selector("#message.error")
            assert "seconds" in page.inner_text("#message")
            assert opened.errors == []
        finally:
            opened.close()
    finally:
        hub.stop()


def test_on_a_real_time_hub_the_bus_time_panel_stays_hidden(page):
    # The page is ready after its first poll, which read the hub's time.
    assert page.locator("#bus-time").is_hidden()
