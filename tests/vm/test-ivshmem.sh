#!/bin/sh
# Host driver for the ivshmem VM scenarios (issue 8): guest clients and host
# clients share channel can0 through ivshmem regions the hub serves.
#
#   host hub --ivshmem A,B  <-memory-backend-file A, B-> QEMU ivshmem-plain x2
#
# Phase 1 ("ivshmem-flood"): a guest client floods can0 through region A; the
#   host kills QEMU (SIGKILL) mid-traffic while host clients stream SIDE
#   sequence-numbered frames on can1. Checks: the host clients' stream is
#   complete and in order, the hub detaches the dead guest after its beat
#   timeout and keeps running, and phase 2 reuses the same regions.
# Phase 2 ("ivshmem"):
#     guest: fieldhub gen  --hub ivshmem://…/resource2 (device 1)  -> host dump
#     guest: fieldhub dump --hub ivshmem://…/resource2 (device 2)  <- host gen
#   Checks: COUNT guest frames reach a host client in order, none lost (here);
#   COUNT host frames reach the guest in order (the scenario).
#
# Exit status 0 only if every check passes. Needs target/release/fieldhub,
# qemu-system-x86_64, busybox-static, cpio (as test-bridge.sh).
set -eu
NAME=test-ivshmem
. "$(dirname "$0")/lib.sh"
COUNT=${COUNT:-100000}
SIDE=6000
need qemu-system-x86_64

"$ROOT/tests/vm/build-initramfs.sh"
start_run
HUB="unix:$RUN/hub.sock"
# A dump of little-endian counters (`gen -D i`): all n, in order.
check_counters() {
    awk -v n="$1" -v what="$2" 'BEGIN { for (i = 0; i < 256; i++) v[sprintf("%02X", i)] = i }
        { c = v[$4] + 256 * (v[$5] + 256 * (v[$6] + 256 * v[$7]))
          if (c != next_c) { print what ": frame " NR ": counter " c ", expected " next_c; exit 1 }
          next_c++ }
        END { if (next_c != n) { print what ": got " next_c " of " n; exit 1 }
              print "test-ivshmem: " n " " what " in order" }' "$3"
}
ivshmem_devices="-object memory-backend-file,id=fhtx,share=on,mem-path=$RUN/tx,size=4M -device ivshmem-plain,memdev=fhtx
    -object memory-backend-file,id=fhrx,share=on,mem-path=$RUN/rx,size=4M -device ivshmem-plain,memdev=fhrx"
attached() { grep -c 'client connected over ivshmem' "$RUN/hub.log" || true; }

FIELDHUB_LOG=info "$FIELDHUB" hub --no-shm --listen "$HUB" --ivshmem "$RUN/tx,$RUN/rx" >"$RUN/hub.log" 2>&1 &
hub=$!
pids="$pids $hub"
for _ in $(seq 50); do [ -S "$RUN/hub.sock" ] && break; sleep 0.1; done
[ -S "$RUN/hub.sock" ] || fail "the hub did not start: $(cat "$RUN/hub.log")"

# --- phase 1: kill the guest mid-traffic ------------------------------------
"$FIELDHUB" dump --hub "$HUB" can0,100:7FF >"$RUN/flood-rx.log" 2>&1 &
flood_dump=$!
"$FIELDHUB" dump --lossless --hub "$HUB" -n "$SIDE" can1,300:7FF >"$RUN/side-rx.log" 2>"$RUN/side-dump.err" &
side_dump=$!
pids="$pids $flood_dump $side_dump"
# shellcheck disable=SC2086 # the device list is split on purpose
"$ROOT/tests/vm/run-guest.sh" ivshmem-flood $ivshmem_devices >"$RUN/flood-guest.log" 2>&1 &
pids="$pids $!"
for _ in $(seq 1200); do [ "$(wc -l <"$RUN/flood-rx.log")" -ge 1000 ] && break; sleep 0.1; done
[ "$(wc -l <"$RUN/flood-rx.log")" -ge 1000 ] || fail "phase 1: no flood from the guest: $(tail -5 "$RUN/flood-guest.log")"
# Host clients stream on can1 across the kill and the beat timeout (1 ms apart).
"$FIELDHUB" gen --hub "$HUB" -g 1 -I 300 -L 4 -D i -n "$SIDE" can1 &
side_gen=$!
pids="$pids $side_gen"
sleep 1
pkill -KILL -f 'fieldhub.scenario=ivshmem-flood' || fail "phase 1: no QEMU to kill"
killed_at=$(wc -l <"$RUN/flood-rx.log")
echo "test-ivshmem: phase 1: killed the guest after the host had $killed_at of its frames"
for _ in $(seq 100); do grep -q 'client disconnected: no sign of life' "$RUN/hub.log" && break; sleep 0.1; done
grep -q 'client disconnected: no sign of life' "$RUN/hub.log" || fail "phase 1: the hub did not detach the killed guest"
kill -0 "$hub" 2>/dev/null || fail "phase 1: the hub died with the guest: $(tail -5 "$RUN/hub.log")"
wait "$side_gen" || fail "phase 1: the host sender failed"
wait "$side_dump" || fail "phase 1: the host receiver failed: $(cat "$RUN/side-dump.err")"
check_counters "$SIDE" "host frames on can1 across the guest's death" "$RUN/side-rx.log" || fail "phase 1"
kill "$flood_dump"
echo "test-ivshmem: phase 1: the hub detached the killed guest and kept serving"

# --- phase 2: 100,000 frames each way over the same regions -----------------
before=$(attached)
"$FIELDHUB" dump --lossless --hub "$HUB" -n "$COUNT" can0,100:7FF >"$RUN/host-rx.log" 2>"$RUN/dump.err" &
dump=$!
pids="$pids $dump"
# The host sender starts once both guest clients are attached.
(
    for _ in $(seq 1200); do
        [ "$(attached)" -ge $((before + 2)) ] && break
        sleep 0.1
    done
    "$FIELDHUB" gen --hub "$HUB" -g 0 -I 200 -L 4 -D i -n "$COUNT" can0
) &
pids="$pids $!"
# shellcheck disable=SC2086
"$ROOT/tests/vm/run-guest.sh" ivshmem $ivshmem_devices >"$RUN/guest.log" 2>&1 || true
grep -ao 'FIELDHUB-VM-RESULT.*' "$RUN/guest.log" || true
grep -q 'FIELDHUB-VM-RESULT ok' "$RUN/guest.log" || fail "guest: $(tail -20 "$RUN/guest.log")"

wait "$dump" || fail "host dump: $(cat "$RUN/dump.err")"
check_counters "$COUNT" "guest frames reached the host" "$RUN/host-rx.log" || fail "guest to host direction"
echo "test-ivshmem: ok"
