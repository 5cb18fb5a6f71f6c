#!/bin/sh
# Run every benchmark of docs/performance.md RUNS times (default 3), keeping
# each run's JSON in OUT (default $TMPDIR/fieldhub-bench-results), then print the medians as
# Markdown tables (bench/median.py). Take it on a quiet machine: the script
# prints the load average before and after.
set -eu
RUNS=${RUNS:-3}
OUT=${OUT:-${TMPDIR:-/tmp}/fieldhub-bench-results}
FIELDHUB=${FIELDHUB:-target/release/fieldhub}
mkdir -p "$OUT"
echo "load before: $(cat /proc/loadavg)" >&2
i=1
while [ "$i" -le "$RUNS" ]; do
    echo "run $i of $RUNS" >&2
    "$FIELDHUB" bench latency --transport shm --samples 10000 --json --plot "$OUT/latency-shm-$i.svg" >"$OUT/latency-shm-$i.json"
    "$FIELDHUB" bench latency --transport tcp --samples 10000 --json >"$OUT/latency-tcp-$i.json"
    "$FIELDHUB" bench latency --transport shm --busy-poll --samples 300 --can --json >"$OUT/latency-busy-$i.json"
    "$FIELDHUB" bench latency --transport shm --clients 64 --samples 2000 --can --json >"$OUT/latency-64-$i.json"
    "$FIELDHUB" bench latency --transport shm --clients 64 --idle-clients --samples 2000 --can --json >"$OUT/latency-64idle-$i.json"
    "$FIELDHUB" bench throughput --transport shm --seconds 3 --json >"$OUT/throughput-shm-$i.json"
    "$FIELDHUB" bench throughput --transport tcp --seconds 3 --json >"$OUT/throughput-tcp-$i.json"
    "$FIELDHUB" bench cpu --seconds 5 --json >"$OUT/cpu-$i.json"
    i=$((i + 1))
done
echo "load after: $(cat /proc/loadavg)" >&2
python3 bench/median.py "$OUT"
