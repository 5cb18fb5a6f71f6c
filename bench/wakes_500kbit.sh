#!/bin/bash
# The hub's bus thread at 500 kbit/s, counted from /proc rather than sampled: one
# hub with one channel (TIMING: ideal, or timed at 500 kbit/s), `[hub] realtime`
# (REALTIME: true or false), a sender (`fieldhub gen`, GAP ms between frames; 0 on a
# timed channel sends as fast as the bus takes them) and two receivers (`fieldhub
# dump`). Over 5 s in the middle of N frames it prints the frames per second, the bus
# thread's voluntary (it slept) and involuntary (it was preempted) switches a frame,
# the bus thread's CPU a frame (/proc/TID/schedstat), the hub's CPU, and the machine's
# rescheduling and function-call interrupts a frame (/proc/interrupts RES and CAL: how
# often a wake-up crossed to another core; every program's, the hub's clients' too).
# docs/profile-2026-11-28-500kbit.md gives figures. An optional SCHED changes one
# thing's scheduling once the clients are attached (bench/sched_attr.py; the
# comparisons of docs/performance.md, "The bus thread's scheduling"):
#   none             as the hub sets it (the default)
#   slice:NS         the bus thread's EEVDF slice (sched_runtime, 100000-100000000)
#   nice:N           the bus thread's nice value (below 0 needs root)
#   batch-others     SCHED_BATCH for every hub thread but the bus thread
#   batch-receivers  SCHED_BATCH for the two receivers (the clients' side)
#   pin:CPU          the bus thread alone on one CPU (its clients placed freely)
# WHOM=1 in the environment also traces (perf, root) who took the core each time the
# bus thread was switched out runnable, per frame: after its own sched_yield (the
# spin before a sleep yields; the kernel counts that as involuntary too), else
# preempted by the sender, a receiver, another hub thread, or a program by name.
# Run under the bench lock; REALTIME=true needs root (SCHED_FIFO):
#   flock /tmp/fieldhub-bench.lock bench/wakes_500kbit.sh target/release/fieldhub ideal false 0.244 40000
set -eu
BIN=$(realpath "${1:?usage: wakes_500kbit.sh FIELDHUB ideal|timed true|false GAP_MS FRAMES [SCHED]}")
TIMING=$2; REALTIME=$3; GAP=$4; N=$5; SCHED=${6:-none}
SCHED_ATTR="python3 $(dirname "$(realpath "$0")")/sched_attr.py"
D=$(mktemp -d)
cd "$D"
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
chan="[[channel]]
name = \"can0\"
protocol = \"can\""
[ "$TIMING" = timed ] && chan="$chan
timing = \"timed\"
bitrate = 500000"
printf '[hub]\nlisten = ["127.0.0.1:29611"]\nshm = "floors-exp"\nrealtime = %s\n%s\n' "$REALTIME" "$chan" > hub.toml
$BIN hub --config hub.toml > hub.log 2>&1 &
HUB=$!
sleep 1
DUMPS=""
for i in 1 2; do $BIN dump can0 --hub shm://floors-exp > dump$i.txt 2>&1 & DUMPS="$DUMPS $!"; done
sleep 0.5
BUS=$(grep -l '^fh-bus$' /proc/$HUB/task/*/comm | cut -d/ -f5)
threads_of() { ls /proc/$1/task; }
case $SCHED in
  none) ;;
  slice:*) $SCHED_ATTR $BUS slice "${SCHED#slice:}" >/dev/null ;;
  nice:*) $SCHED_ATTR $BUS nice "${SCHED#nice:}" >/dev/null ;;
  batch-others) for t in $(threads_of $HUB); do [ "$t" = "$BUS" ] || $SCHED_ATTR $t batch >/dev/null; done ;;
  batch-receivers) for p in $DUMPS; do for t in $(threads_of $p); do $SCHED_ATTR $t batch >/dev/null; done; done ;;
  pin:*) taskset -p -c "${SCHED#pin:}" $BUS >/dev/null ;;
  *) echo "wakes_500kbit.sh: unknown SCHED '$SCHED' (none, slice:NS, nice:N, batch-others, batch-receivers, pin:CPU)" >&2; exit 2 ;;
esac
$BIN gen can0 --hub shm://floors-exp -g $GAP -n $N -I 100 -L 8 -D i > gen.txt 2>&1 &
GEN=$!
sleep 3
read_counts() { echo "$(grep -h '^voluntary\|^nonvoluntary' /proc/$HUB/task/$BUS/status | awk '{print $2}' | tr '\n' ' ') $(awk '/sum_exec_runtime/{s+=$3} END{print s}' /proc/$HUB/task/*/sched) $(cut -d' ' -f1 /proc/$HUB/task/$BUS/schedstat) $(wc -l < dump1.txt) $(date +%s.%N) $(awk '$1 == "RES:" || $1 == "CAL:" {for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) s += $i} END {print s}' /proc/interrupts)"; }
if [ "${WHOM:-0}" = 1 ]; then
  perf record -q -e sched:sched_switch --filter "prev_pid == $BUS" \
    -e syscalls:sys_enter_sched_yield --filter "common_pid == $BUS" -a -o whom.data -- sleep 5 2>/dev/null &
  PERF=$!
  for t in $(ls /proc/$GEN/task); do echo "$t sender"; done > roles.txt
  for p in $DUMPS; do for t in $(ls /proc/$p/task); do echo "$t receiver"; done; done >> roles.txt
  for t in $(ls /proc/$HUB/task); do echo "$t hub"; done >> roles.txt
fi
b=$(read_counts); sleep 5; a=$(read_counts)
wait $GEN
python3 - "$b" "$a" <<'PY'
import sys
b=[float(x) for x in sys.argv[1].split()]; a=[float(x) for x in sys.argv[2].split()]
vol,invol,cpu_ms,bus_ns,frames,t,ipis=[x-y for x,y in zip(a,b)]
print(f"frames {frames:.0f} in {t:.2f} s ({frames/t:.0f}/s): bus thread {vol/frames:.3f} voluntary and {invol/frames:.3f} involuntary switches a frame, {bus_ns/frames:.0f} ns of CPU a frame; hub CPU {cpu_ms/1e3/t*100:.2f} % of a core, {cpu_ms*1e3/frames:.1f} us a frame; {ipis/frames:.2f} cross-core interrupts a frame (machine)")
PY
if [ "${WHOM:-0}" = 1 ]; then
  wait $PERF || true
  # A switch out in state R (or R+) right after its sched_yield is its own; any
  # other is a preemption, by whom, per frame.
  perf script -i whom.data -F event,trace 2>/dev/null | python3 -c '
import collections, re, sys
frames = float(sys.argv[1])
roles = dict(line.split() for line in open("roles.txt"))
by, yielded, yields = collections.Counter(), False, 0
for line in sys.stdin:
    if "sched_yield" in line:
        yielded, yields = True, yields + 1
        continue
    m = re.search(r"prev_state=(\S+) ==> next_comm=(.+?) next_pid=(\d+)", line)
    if m and m[1].startswith("R"):
        by["its own yield" if yielded else roles.get(m[3], m[2])] += 1
    yielded = False
print(f"yields {yields / frames:.3f} a frame; switched out runnable: " + ", ".join(f"{c} {n / frames:.3f}" for c, n in by.most_common(6)) + " a frame (over the 5 s)")
' "$(echo "$a $b" | awk '{print $5 - $12}')"
fi
kill $(jobs -p) 2>/dev/null; wait 2>/dev/null || true
rm -rf "$D"
