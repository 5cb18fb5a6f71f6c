"""The page under a flood of 2,048 identifiers: the issue's budget — any
click answers within 100 ms and the page's main thread stays under half
busy — measured inside the browser, not by the host's clock."""

import os
import subprocess
import time

from conftest import FIELDHUB, screenshot

#: Installed before the flood: the browser's Event Timing of every click
#: over 16 ms (from the input to the next frame presented after its
#: handlers: what the user waits for), a count of clicks, and the main
#: thread's busy time as long tasks and as the page's own work (the User
#: Timing measures the page reports for each batch and redraw).
OBSERVE = """() => {
  const budget = { clicks: 0, answers: [], longTasks: 0, work: {}, start: performance.now() };
  window.budget = budget;
  document.addEventListener('click', () => { budget.clicks += 1; }, true);
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) if (e.name === 'click') budget.answers.push(e.duration);
  }).observe({ type: 'event', durationThreshold: 16 });
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) budget.longTasks += e.duration;
  }).observe({ type: 'longtask' });
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      if (e.name.startsWith('fieldhub-')) budget.work[e.name] = (budget.work[e.name] || 0) + e.duration;
    }
  }).observe({ type: 'measure' });
}"""

RESULT = """() => {
  const b = window.budget;
  const span = performance.now() - b.start;
  const work = Object.values(b.work).reduce((a, x) => a + x, 0);
  return { clicks: b.clicks, answers: b.answers, span, longTasks: b.longTasks / span, work: work / span,
           byName: Object.fromEntries(Object.entries(b.work).map(([k, v]) => [k, Math.round(v)])) };
}"""


def test_with_2048_identifiers_flooding_every_click_answers_within_100_ms_and_the_page_stays_under_half_busy(
        hub, page):
    # The generator runs niced: it sends as fast as the bus takes frames and
    # would otherwise take the browser's share of a small machine's cores,
    # which is the host's budget, not the page's.
    gen = subprocess.Popen(["nice", "-n", "10", FIELDHUB, "gen", "--hub", hub.url, "-g", "0", "-I", "r", "-L", "8", "-D", "r",
                            "--seed", "40", "can0"], stderr=subprocess.PIPE)
    try:
        page.wait_for_function("Number(document.getElementById('rate').textContent.replace(/,/g, '')) > 10000",
                               timeout=15_000)
        page.evaluate(OBSERVE)
        # The user's tasks while the bus floods: open the overwrite view (it
        # took 10.5 s before the table was virtual), sort it by three
        # columns, scroll it, go to the trace, pause and resume it, sort it.
        page.click("nav button[data-tab=overwrite]")
        page.wait_for_function("document.getElementById('overwrite-count').textContent === '2,048'",
                               timeout=10_000)
        clicks = 1
        for column in ("count", "period", "jitter", "id"):
            page.click(f'#overwrite-head th[data-sort="{column}"]')
            clicks += 1
            time.sleep(0.25)
        page.wait_for_function(
            "document.querySelector('#overwrite-head [aria-sort]').dataset.sort === 'id'")
        first = page.locator("#overwrite-rows tr[data-id] .o-id").first.inner_text()
        assert first == "000", "sorted by id, the lowest first"
        page.locator("#overwrite-scroll").evaluate("s => { s.scrollTop = 1000 * 20; }")
        page.wait_for_selector('#overwrite-rows tr[data-id="3E8"]')
        assert page.locator("#overwrite-rows tr[data-id]").count() < 100, "only the rows in sight exist"
        screenshot(page, "overwrite-2048")
        for button in ("nav button[data-tab=trace]", "#pause", '#trace-head [data-sort="id"]', "#pause",
                       '#trace-head [data-sort="id"]', "nav button[data-tab=load]",
                       "nav button[data-tab=overwrite]", "nav button[data-tab=trace]"):
            page.click(button)
            clicks += 1
            time.sleep(0.25)
        # Event Timing reports a click once its frame is presented.
        time.sleep(0.5)
        result = page.evaluate(RESULT)
        rate = page.inner_text("#rate")
    finally:
        gen.terminate()
        gen.wait(10)
    print(f"{rate} frames/s on the bus; clicks answered over 16 ms (ms): {result['answers']} of {clicks}; "
          f"main thread busy: {result['longTasks']:.0%} in long tasks, {result['work']:.0%} the page's own work "
          f"over {result['span'] / 1000:.1f} s (ms by kind: {result['byName']})")
    assert result["clicks"] == clicks
    # A browser starved of CPU by other processes misses any budget: the
    # host's load average goes with a failure.
    load = "load average %.1f %.1f %.1f on %d cores" % (*os.getloadavg(), os.cpu_count())
    assert all(d < 100 for d in result["answers"]), f"click answers (ms): {result['answers']}; {load}"
    assert result["longTasks"] < 0.5, f"long tasks took {result['longTasks']:.0%} of the main thread"
    assert result["work"] < 0.5, f"the page's own work took {result['work']:.0%} of the main thread"
