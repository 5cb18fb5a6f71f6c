#!/bin/sh
# Run every benchmark of docs/performance.md RUNS times (default 3), keeping
# each run's JSON in OUT (default $TMPDIR/fieldhub-bench-results), then print the medians as
# Markdown tables (bench/median.py). Take it on a quiet machine: the script
# prints the load average before and after.
#
# With Vector SIL Kit set up (its setup.sh; bench/README.md), every run also
# measures SIL Kit's two-participant CAN round trip right after fieldhub's shm
# round trip: SILKIT_DIR is the directory setup.sh filled (default /tmp/silkit,
# setup.sh's own default), SILKIT_RTT its rtt.sh (default
# ../shared/peers/silkit/rtt.sh, next to the repository). Without them the
# script says so once and carries on.
#
# QUICK=1 takes tiny samples and short windows: a check that the script and
# its tables work, never figures.
set -eu
RUNS=${RUNS:-3}
OUT=${OUT:-${TMPDIR:-/tmp}/fieldhub-bench-results}
FIELDHUB=${FIELDHUB:-target/release/fieldhub}
SILKIT_DIR=${SILKIT_DIR:-/tmp/silkit}
SILKIT_RTT=${SILKIT_RTT:-../shared/peers/silkit/rtt.sh}
if [ "${QUICK:-0}" = 1 ]; then
    samples=300 busy=50 many=100 scaling=100 seconds=0.5 cpu_seconds=0.5
else
    samples=10000 busy=300 many=2000 scaling=1000 seconds=3 cpu_seconds=5
fi
mkdir -p "$OUT"
# Results of an earlier invocation would count as runs of this one.
rm -f "$OUT"/*-[0-9]*.json "$OUT"/*-[0-9]*.svg
silkit=yes
if [ ! -f "$SILKIT_RTT" ] || [ ! -x "$SILKIT_DIR/silkit_rtt" ]; then
    silkit=
    echo "SIL Kit round trip skipped: run 'sh $(dirname "$SILKIT_RTT")/setup.sh $SILKIT_DIR' (SILKIT_RTT=$SILKIT_RTT, SILKIT_DIR=$SILKIT_DIR)" >&2
fi
echo "load before: $(cat /proc/loadavg)" >&2
i=1
while [ "$i" -le "$RUNS" ]; do
    echo "run $i of $RUNS" >&2
    "$FIELDHUB" bench latency --transport shm --samples $samples --json --plot "$OUT/latency-shm-$i.svg" >"$OUT/latency-shm-$i.json"
    # SIL Kit is never a reason to stop: its figures are a comparison, not the benchmark.
    if [ -n "$silkit" ]; then
        python3 bench/silkit.py "$SILKIT_RTT" "$SILKIT_DIR" $samples >"$OUT/silkit-$i.json.part" &&
            mv "$OUT/silkit-$i.json.part" "$OUT/silkit-$i.json" ||
            { rm -f "$OUT/silkit-$i.json.part"; echo "SIL Kit round trip failed in run $i; carrying on" >&2; }
    fi
    "$FIELDHUB" bench latency --transport tcp --samples $samples --json >"$OUT/latency-tcp-$i.json"
    "$FIELDHUB" bench latency --transport shm --busy-poll --samples $busy --can --json >"$OUT/latency-busy-$i.json"
    "$FIELDHUB" bench latency --transport shm --clients 64 --samples $many --can --json >"$OUT/latency-64-$i.json"
    "$FIELDHUB" bench latency --transport shm --clients 64 --idle-clients --samples $many --can --json >"$OUT/latency-64idle-$i.json"
    "$FIELDHUB" bench scaling --clients 2,8,64,256 --channels 1,10,100 --samples $scaling --json >"$OUT/scaling-$i.json"
    "$FIELDHUB" bench throughput --transport shm --seconds $seconds --json >"$OUT/throughput-shm-$i.json"
    "$FIELDHUB" bench throughput --transport tcp --seconds $seconds --json >"$OUT/throughput-tcp-$i.json"
    "$FIELDHUB" bench cpu --seconds $cpu_seconds --json >"$OUT/cpu-$i.json"
    i=$((i + 1))
done
echo "load after: $(cat /proc/loadavg)" >&2
python3 bench/median.py "$OUT"
