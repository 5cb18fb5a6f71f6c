#!/usr/bin/env python3
"""Vector SIL Kit's CAN round trip as JSON, for bench/median.py to set next to
fieldhub's.

Usage: bench/silkit.py RTT_SH DIR SAMPLES [chain|ping]

Runs SIL Kit's rtt.sh (two participants through a local registry; DIR as
given to its setup.sh) and prints a list with one scenario, shaped like the
`fieldhub bench` ones: {"scenario", "mode", "samples", "min_us", "p50_us",
..., "mean_us"}. rtt.sh exits 0 even when the round trip failed and SIL Kit
logs to the same stdout, so the result is the one line that matches, and no
such line is an error (exit status 1, with what rtt.sh printed).
"""
import json
import re
import subprocess
import sys

# silkit_rtt.c: "SIL Kit CAN RTT chain (n=10000): min 23.2 p50 29.1 ... mean 31.0 us"
RESULT = re.compile(r"SIL Kit CAN RTT (?P<mode>\w+) \(n=(?P<n>\d+)\):(?P<figures>.*?)\s*us\s*$", re.MULTILINE)
FIGURE = re.compile(r"(?P<key>[a-z]+\d*)\s+(?P<value>\d+(?:\.\d+)?)")


def parse(output):
    """The scenario in rtt.sh's output, or None if it has no result line."""
    found = RESULT.search(output)
    if not found:
        return None
    figures = {m["key"] + "_us": float(m["value"]) for m in FIGURE.finditer(found["figures"])}
    if not {"p50_us", "p99_us"} <= figures.keys():
        return None
    mode = found["mode"]
    waits = "sleeps until the answer" if mode == "chain" else "spins until the answer"
    return {
        "scenario": f"SIL Kit CAN, {mode} (two participants, 8-byte frames; the pinger {waits})",
        "mode": mode,
        "samples": int(found["n"]),
        **figures,
    }


def main(argv):
    if len(argv) not in (4, 5):
        sys.exit("usage: bench/silkit.py RTT_SH DIR SAMPLES [chain|ping]")
    rtt_sh, directory, samples = argv[1:4]
    mode = argv[4] if len(argv) == 5 else "chain"
    run = subprocess.run(["sh", rtt_sh, directory, samples, mode], capture_output=True, text=True)
    scenario = parse(run.stdout)
    if scenario is None:
        sys.exit(f"{rtt_sh} printed no round trip (exit status {run.returncode}):\n{run.stdout}{run.stderr}")
    print(json.dumps([scenario], indent=2))


if __name__ == "__main__":
    main(sys.argv)
