"""How fast the web monitor answers clicks under a flood of 2,048 identifiers.

Runs the user's round of tests/ui/test_many_ids.py (open the overwrite view,
sort it by four columns, scroll it, go to the trace, pause, sort, resume, look
at the load) against a hub flooded by `fieldhub gen -g 0 -I r`, and prints
what the browser measured: the Event Timing of every click over 16 ms (from
the input to the next frame presented: what the user waits for), and the main
thread's busy share, as long tasks and as the page's own work (the User
Timing measures `fieldhub-batch` and `fieldhub-render-*` the page reports).
The issue's budget is every click under 100 ms and the main thread under half
busy; the figures are printed next to it with the host's load average, since
a browser starved of CPU by other processes misses any budget. A benchmark,
not a test: it prints figures and asserts nothing.

    .venv/bin/python bench/monitor_clicks.py [--fieldhub target/release/fieldhub] [--runs 3]

Needs Playwright in the Python environment (`make ui-env` installs it) and
Debian's chromium at /usr/bin/chromium.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

#: Installed before the round: Event Timing of clicks, long tasks, and the
#: page's own User Timing measures.
OBSERVE = """() => {
  const budget = { answers: [], longTasks: 0, work: {}, start: performance.now() };
  window.budget = budget;
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
  return { answers: b.answers, span, longTasks: b.longTasks / span, work: work / span,
           byName: Object.fromEntries(Object.entries(b.work).map(([k, v]) => [k, Math.round(v)])) };
}"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fieldhub", default="target/release/fieldhub")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    # The round and the hub come from the UI tests, which read these at import.
    os.environ["FIELDHUB_BIN"] = str(Path(args.fieldhub).resolve())
    os.environ["CHROMIUM"] = args.chromium
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "ui"))
    import test_many_ids
    from conftest import CHROMIUM_ARGS, CONFIG, Page, RunningHub
    from playwright.sync_api import sync_playwright

    # The round's screenshot belongs to the docs the tests write, not to a benchmark.
    test_many_ids.screenshot = lambda page, name: None

    worst, long_tasks, work = [], [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS)
        for run in range(args.runs):
            hub = RunningHub(CONFIG)
            opened = Page(browser, hub)
            page = opened.page
            try:
                with test_many_ids.flood(hub):
                    test_many_ids.wait_for_flood(page)
                    page.evaluate(OBSERVE)
                    clicks = test_many_ids.user_round(page)
                    time.sleep(0.5)  # Event Timing reports a click once its frame is presented.
                    result = page.evaluate(RESULT)
                    rate = page.inner_text("#rate")
            finally:
                opened.close()
                hub.stop()
            answers = [round(a) for a in result["answers"]]
            worst.append(max(answers, default=0))
            long_tasks.append(result["longTasks"])
            work.append(result["work"])
            print(f"run {run + 1}: {rate} frames/s on the bus; {clicks} clicks, {len(answers)} over 16 ms: {answers} ms; "
                  f"main thread {result['longTasks']:.0%} in long tasks, {result['work']:.0%} the page's own work "
                  f"over {result['span'] / 1000:.1f} s (ms by kind: {result['byName']}); "
                  f"load {open('/proc/loadavg').read().split()[0]} on {os.cpu_count()} cores", flush=True)
        browser.close()
    print(f"median of {args.runs}: slowest click {statistics.median(worst):.0f} ms (budget 100), "
          f"long tasks {statistics.median(long_tasks):.0%} and own work {statistics.median(work):.0%} "
          f"of the main thread (budget 50 %)")


if __name__ == "__main__":
    main()
