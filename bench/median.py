#!/usr/bin/env python3
"""Medians over repeated `fieldhub bench ... --json` runs, as Markdown tables.

Usage: bench/median.py DIR   (the JSON files bench/run.sh wrote: latency-*,
silkit-*, scaling-*, throughput-*, cpu-*). Each scenario's figures are the
medians over the runs that measured it; each ratio is the median of the
per-run ratios (a ratio comes from one run, where hub and baseline shared the
machine's state).
"""
import glob
import json
import os
import re
import statistics
import sys


def scenarios(directory, *prefixes):
    """scenario name -> list of that scenario's objects, one per run, in the
    order of `prefixes` (the file name stems bench/run.sh writes)."""
    found = {}
    for prefix in prefixes:
        for path in sorted(glob.glob(os.path.join(directory, prefix + "-[0-9]*.json"))):
            with open(path) as f:
                for element in json.load(f):
                    found.setdefault(element["scenario"], []).append(element)
    return found


def runs_of(directory, prefix):
    """run number -> the scenarios of that run's `prefix-N.json`."""
    found = {}
    for path in glob.glob(os.path.join(directory, prefix + "-[0-9]*.json")):
        run = re.fullmatch(re.escape(prefix) + r"-(\d+)\.json", os.path.basename(path))
        if run:
            with open(path) as f:
                found[int(run[1])] = json.load(f)
    return found


def median(runs, *path):
    values = []
    for run in runs:
        for key in path:
            run = run[key]
        values.append(run)
    return statistics.median(values)


def latency(directory):
    keys = ["p50_us", "p80_us", "p95_us", "p99_us", "p999_us", "max_us", "mean_us", "std_us"]
    print("| round trip (µs) | runs | p50 | p80 | p95 | p99 | p99.9 | max | mean | std | ratio p50 | ratio p99 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, runs in scenarios(directory, "latency-shm", "latency-tcp", "latency-busy", "latency-64", "latency-64idle").items():
        hub = " | ".join(f"{median(runs, 'hub', k):.1f}" for k in keys)
        base = " | ".join(f"{median(runs, 'baseline', k):.2f}" for k in keys)
        r50, r99 = median(runs, "ratio", "p50"), median(runs, "ratio", "p99")
        print(f"| hub, {name} | {len(runs)} | {hub} | **{r50:.2f}** | **{r99:.2f}** |")
        print(f"| {runs[0]['baseline_kind']}, {runs[0]['payload_bytes']} B | {len(runs)} | {base} | | |")
        if all("two_clients" in r for r in runs):
            alone = " | ".join(f"{median(runs, 'two_clients', 'hub', k):.1f}" for k in keys)
            a50, a99 = median(runs, "two_clients", "ratio", "p50"), median(runs, "two_clients", "ratio", "p99")
            print(f"| ↳ same hub, same run, 2 clients only (ratio: hub above / this) | {len(runs)} | {alone} | *{a50:.2f}* | *{a99:.2f}* |")
        extra = runs[0].get("extra_clients")
        if extra:
            kept = all(r["extra_clients"]["order_kept"] for r in runs)
            dropped = sum(r["extra_clients"]["frames_dropped"] for r in runs)
            print(f"| ↳ {extra['count']} extra clients: order kept in every run: {kept}; frames dropped: {dropped} | | | | | | | | | | | |")
    print()


def silkit(directory):
    """SIL Kit's two-participant round trip next to the hub's shm round trip
    (8-byte CAN, adaptive waits) of the same runs, ratio hub / SIL Kit."""
    hub_runs, silkit_runs = runs_of(directory, "latency-shm"), runs_of(directory, "silkit")
    pairs = []
    for run in sorted(hub_runs.keys() & silkit_runs.keys()):
        hub = [s for s in hub_runs[run] if s["payload_bytes"] == 8]
        if hub and silkit_runs[run]:
            pairs.append((hub[0], silkit_runs[run][0]))
    if not pairs:
        return
    hub, peer = [h for h, _ in pairs], [p for _, p in pairs]
    r50 = statistics.median(h["hub"]["p50_us"] / p["p50_us"] for h, p in pairs)
    r99 = statistics.median(h["hub"]["p99_us"] / p["p99_us"] for h, p in pairs)
    print("| round trip, same runs (µs) | runs | p50 | p99 | ratio p50 hub/SIL Kit | ratio p99 hub/SIL Kit |")
    print("|---|---|---|---|---|---|")
    print(f"| hub, {hub[0]['scenario']} | {len(pairs)} | {median(hub, 'hub', 'p50_us'):.1f} | "
          f"{median(hub, 'hub', 'p99_us'):.1f} | **{r50:.2f}** | **{r99:.2f}** |")
    print(f"| {peer[0]['scenario']} | {len(pairs)} | {median(peer, 'p50_us'):.1f} | {median(peer, 'p99_us'):.1f} | | |")
    print()


def scaling(directory):
    """The clients and channels series: p50 and p99 of each point, and their
    ratios to the series' first point (each the median of the runs')."""
    # Both series start with the same point (2 clients, 1 channel), under
    # the same scenario name: a point is its series and its name.
    points = {}
    for run in runs_of(directory, "scaling").values():
        for point in run:
            points.setdefault((point["series"], point["scenario"]), []).append(point)
    for series, heading in [("clients", "clients on one channel"),
                            ("channels", "channels on the hub (2 clients on the first, background on the others)")]:
        rows = [runs for (s, _), runs in points.items() if s == series]
        if not rows:
            continue
        print(f"| {heading} | runs | p50 (µs) | p99 (µs) | ratio p50 | ratio p99 | notes |")
        print("|---|---|---|---|---|---|---|")
        for runs in rows:
            notes = []
            if all("extra_clients" in r for r in runs):
                kept = all(r["extra_clients"]["order_kept"] for r in runs)
                dropped = sum(r["extra_clients"]["frames_dropped"] for r in runs)
                notes.append(f"order kept: {kept}; frames dropped: {dropped}")
            if all("background" in r for r in runs):
                b = runs[0]["background"]
                lost = sum(r["background"]["frames_sent"] - r["background"]["frames_received"] for r in runs)
                notes.append(f"{b['frames_per_s_per_channel']:g} frames/s on each of {b['channels']}; not received: {lost}")
            print(f"| {runs[0][series]} | {len(runs)} | {median(runs, 'hub', 'p50_us'):.1f} | "
                  f"{median(runs, 'hub', 'p99_us'):.1f} | **{median(runs, 'ratio', 'p50'):.2f}** | "
                  f"**{median(runs, 'ratio', 'p99'):.2f}** | {'; '.join(notes)} |")
        print()


def throughput(directory):
    print("| one-way throughput | runs | hub frames/s | hub payload Mbit/s | baseline frames/s | baseline | ratio |")
    print("|---|---|---|---|---|---|---|")
    for name, runs in scenarios(directory, "throughput-shm", "throughput-tcp").items():
        print(
            f"| {name} | {len(runs)} | {median(runs, 'hub', 'frames_per_s'):,.0f} | "
            f"{median(runs, 'hub', 'payload_mbit_per_s'):.1f} | {median(runs, 'baseline', 'frames_per_s'):,.0f} | "
            f"{runs[0]['baseline']['kind']} | **{median(runs, 'ratio'):.4f}** |"
        )
    print()


def cpu(directory):
    print("| CPU, % of one core | runs | frames/s | hub (stat) | hub (precise) | clients (stat) | clients (precise) |")
    print("|---|---|---|---|---|---|---|")
    for name, runs in scenarios(directory, "cpu").items():
        def precise(side):
            values = [r[side].get("cpu_percent_precise") for r in runs]
            return f"{statistics.median(values):.3f}" if None not in values else "–"
        print(
            f"| {name} | {len(runs)} | {median(runs, 'frames_per_s'):,.0f} | "
            f"{median(runs, 'hub', 'cpu_percent'):.2f} | {precise('hub')} | "
            f"{median(runs, 'client_process', 'cpu_percent'):.2f} | {precise('client_process')} |"
        )
    print()


if __name__ == "__main__":
    directory = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.environ.get("TMPDIR", "/tmp"), "fieldhub-bench-results")
    latency(directory)
    silkit(directory)
    scaling(directory)
    throughput(directory)
    cpu(directory)
