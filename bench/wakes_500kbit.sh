#!/bin/bash
# The hub's bus thread at 500 kbit/s, counted from /proc rather than sampled: one
# hub with one channel (TIMING: ideal, or timed at 500 kbit/s), `[hub] realtime`
# (REALTIME: true or false), a sender (`fieldhub gen`, GAP ms between frames; 0 on a
# timed channel sends as fast as the bus takes them) and two receivers (`fieldhub
# dump`). Over 5 s in the middle of N frames it prints the frames per second, the bus
# thread's voluntary (it slept) and involuntary (it was preempted) switches a frame,
# and the hub's CPU. docs/profile-2026-11-28-500kbit.md gives figures. Run under the
# bench lock; REALTIME=true needs root (SCHED_FIFO):
#   flock /tmp/fieldhub-bench.lock bench/wakes_500kbit.sh target/release/fieldhub ideal false 0.244 40000
set -eu
BIN=$(realpath "${1:?usage: wakes_500kbit.sh FIELDHUB ideal|timed true|false GAP_MS FRAMES}")
TIMING=$2; REALTIME=$3; GAP=$4; N=$5
D=$(mktemp -d)
cd "$D"
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
for i in 1 2; do $BIN dump can0 --hub shm://floors-exp > dump$i.txt 2>&1 & done
sleep 0.5
BUS=$(grep -l '^fh-bus$' /proc/$HUB/task/*/comm | cut -d/ -f5)
$BIN gen can0 --hub shm://floors-exp -g $GAP -n $N -I 100 -L 8 -D i > gen.txt 2>&1 &
GEN=$!
sleep 3
read_counts() { echo "$(grep -h '^voluntary\|^nonvoluntary' /proc/$HUB/task/$BUS/status | awk '{print $2}' | tr '\n' ' ') $(awk '/sum_exec_runtime/{s+=$3} END{print s}' /proc/$HUB/task/*/sched) $(wc -l < dump1.txt) $(date +%s.%N)"; }
b=$(read_counts); sleep 5; a=$(read_counts)
wait $GEN
python3 - "$b" "$a" <<'PY'
import sys
b=[float(x) for x in sys.argv[1].split()]; a=[float(x) for x in sys.argv[2].split()]
vol,invol,cpu_ms,frames,t=[x-y for x,y in zip(a,b)]
print(f"frames {frames:.0f} in {t:.2f} s ({frames/t:.0f}/s): bus thread {vol/frames:.3f} voluntary and {invol/frames:.3f} involuntary switches a frame; hub CPU {cpu_ms/1e3/t*100:.2f} % of a core, {cpu_ms*1e3/frames:.1f} us a frame")
PY
kill $(jobs -p) 2>/dev/null; wait 2>/dev/null || true
rm -rf "$D"
