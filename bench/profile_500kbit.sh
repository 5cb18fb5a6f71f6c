#!/bin/sh
# Profile the hub at 500 kbit/s: `fieldhub bench cpu`'s loaded phase with
# three clients (one paced sender, two receivers), the hub's CPU sampled
# with perf (cpu-clock: no hardware counters needed) and every wake-up on
# the machine traced, then attributed per frame (bench/profile_hub.py).
# docs/profile-2026-11-28-500kbit.md is its output. Run as root, under the
# bench lock:
#   flock /tmp/fieldhub-bench.lock sh bench/profile_500kbit.sh target/release/fieldhub /tmp/profile
set -eu
BIN=${1:?usage: profile_500kbit.sh FIELDHUB OUT_DIR}
OUT=${2:?usage: profile_500kbit.sh FIELDHUB OUT_DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
PHASE=40      # s a phase of bench cpu lasts; perf runs 18 s into the fourth
RATE=4098     # frames/s of a fully loaded 500 kbit/s bus (bench cpu prints it)
mkdir -p "$OUT"
cd "$OUT"
"$BIN" bench cpu --seconds "$PHASE" >bench.out 2>bench.err &
BENCH=$!
until grep -q "500kbit/s, 3 client" bench.err 2>/dev/null; do sleep 0.2; done
sleep 2
HUB=$(pgrep -P "$BENCH" -f " hub" | head -1)
BUS=$(grep -l '^fh-bus$' /proc/"$HUB"/task/*/comm | head -1 | cut -d/ -f5)
echo "bench $BENCH, hub $HUB, its bus thread $BUS" | tee pids.txt
perf record -e cpu-clock -F 4000 --call-graph dwarf,16384 -p "$HUB" -o cpu.data -- sleep 10 2>perf-cpu.err
perf stat --per-thread -e sched:sched_switch,sched:sched_wakeup,raw_syscalls:sys_enter,syscalls:sys_enter_futex \
    -p "$HUB" -o stat.txt -- sleep 5
perf record -a -e sched:sched_wakeup -e sched:sched_switch -o sched.data -- sleep 3 2>perf-sched.err
wait "$BENCH"
perf script -i cpu.data -F tid,ip,sym >cpu.txt 2>/dev/null
perf script -i sched.data -F comm,tid,cpu,time,event,trace >sched.txt 2>/dev/null
cat bench.out
python3 "$HERE/profile_hub.py" cpu.txt sched.txt "$BUS" "$RATE" 10 "$(basename "$BIN" | cut -c1-15)"
