#!/bin/sh
# Host driver for the "bridge" VM scenario (issue 8): a QEMU guest's SocketCAN
# application and host clients share channel can0.
#
#   host hub (--listen unix:SOCK) <-unix socket-> QEMU virtio-serial port
#     <-> guest: fieldhub bridge socketcan vcan0 --hub serial:/dev/vportNpM
#     <-> vcan0 <-> canseq (AF_CAN raw, CAN_RAW_FD_FRAMES)
#
# Checks: the guest's COUNT frames (ids 0x100 family, classic and CAN FD)
# reach a host client (`fieldhub dump`) in order, none lost, unchanged; COUNT
# frames sent by a host client (`fieldhub replay`, ids 0x200 family) reach
# canseq in the guest in order (canseq checks, the scenario reports).
# Then, across a restart of the host hub: the guest's controller error frame
# reaches the host as a hub error frame, a host error frame (bus-off) reaches
# canseq, the hub is killed and started again, the same bridge process
# reconnects, and AFTER_RESTART frames pass each way in order (host ids
# 0x300 first, then the guest's 0x180 family). Last, the guest kills its
# bridge (SIGKILL) and starts a new one on the same port: AFTER_RESTART
# frames pass each way again (host 0x340 first, then the guest's 0x1C0).
# Prints throughput both ways. Exit status 0 only if every check passes.
#
# Needs $FIELDHUB_BIN (or target/release/fieldhub), qemu-system-x86_64, busybox-static, cpio.
set -eu
NAME=test-bridge
. "$(dirname "$0")/lib.sh"
COUNT=10000
AFTER_RESTART=2000
need qemu-system-x86_64 cpio

"$ROOT/tests/vm/build-initramfs.sh"
start_run
SOCK=$RUN/hub.sock

cat >"$RUN/hub.toml" <<TOML
[hub]
name = "vm-test"

[[channel]]
name = "can0"
protocol = "canfd"
TOML
# At info the hub logs each port it opens: the second "guest-vcan0" is the
# bridge back after the restart.
start_hub() {
    FIELDHUB_LOG=info "$FIELDHUB" hub --config "$RUN/hub.toml" --listen "unix:$SOCK" >>"$RUN/hub.log" 2>&1 &
    hub=$!
    pids="$pids $hub"
    for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
    [ -S "$SOCK" ] || fail "the hub did not listen on $SOCK: $(cat "$RUN/hub.log")"
}
# serve_bridge N WHAT HOST_BASE NAME: dump can0 to dump-NAME.log, wait until
# the hub has opened guest-vcan0 for the Nth time (WHAT says what that
# means), then replay AFTER_RESTART frames of the family HOST_BASE.
serve_bridge() {
    "$FIELDHUB" dump --hub "unix:$SOCK" -L can0 >"$RUN/dump-$4.log" 2>"$RUN/dump-$4.err" &
    pids="$pids $!"
    await "$2" sh -c "[ \$(grep -c 'port opened.* port=guest-vcan0 ' '$RUN/hub.log') -ge $1 ]"
    echo "test-bridge: $2"
    awk -v n=$AFTER_RESTART -v base="$3" -v channel=can0 -f "$ROOT/tests/vm/seq/frames.awk" >"$RUN/host-frames-$4.log"
    "$FIELDHUB" replay --hub "unix:$SOCK" "$RUN/host-frames-$4.log" >"$RUN/replay-$4.log" 2>&1 \
        || fail "replay once $2: $(cat "$RUN/replay-$4.log")"
}
start_hub

# Host receiver: every frame on can0, candump log format.
"$FIELDHUB" dump --hub "unix:$SOCK" -L can0 >"$RUN/dump.log" 2>"$RUN/dump.err" &
pids="$pids $!"

# Host sender: the 0x200 family as canseq expects it, 200 us apart, replayed
# once the guest's first frame shows that canseq's socket is open.
awk -v n=$COUNT -v base=512 -v channel=can0 -f "$ROOT/tests/vm/seq/frames.awk" >"$RUN/host-frames.log"
(
    for _ in $(seq 900); do grep -q ' can0 100#' "$RUN/dump.log" 2>/dev/null && break; sleep 0.1; done
    "$FIELDHUB" replay --hub "unix:$SOCK" "$RUN/host-frames.log" >"$RUN/replay.log" 2>&1
) &
pids="$pids $!"

start=$(date +%s)
# The hub must listen before QEMU starts: its chardev connects at start, and
# connects again (reconnect=1) after the hub restarts.
"$ROOT/tests/vm/run-guest.sh" bridge -chardev "socket,path=$SOCK,id=fh,reconnect=1" \
    -device virtio-serial-pci -device virtserialport,chardev=fh,name=fieldhub >"$RUN/guest.log" 2>&1 &
guest=$!
pids="$pids $guest"

# Phase 2: the guest's controller error frame (CAN_ERR_CRTL, rx and tx
# warning, counters 96/97) comes after its sequence, so when it is here the
# sequence is complete.
await "the guest's error frame reached the host" grep -q ' can0 20000004#000C000000006061$' "$RUN/dump.log"
host_check=$(awk -v n=$COUNT -v base=256 -f "$ROOT/tests/vm/seq/check.awk" "$RUN/dump.log") || fail "guest -> host: $host_check"
echo "test-bridge: guest -> host: $host_check"
echo "test-bridge: guest -> host: the guest's controller error frame arrived as a hub error frame"
"$FIELDHUB" send --hub "unix:$SOCK" can0 20000040#000000000000F800
await "canseq received the hub's error frame" grep -aq "canseq: the hub's error frame arrived" "$RUN/guest.log"
echo "test-bridge: host -> guest: the hub's bus-off error frame arrived on vcan0"

kill "$hub"
wait "$hub" 2>/dev/null || true
start_hub
echo "test-bridge: hub restarted"
serve_bridge 2 "the guest's bridge reconnected to the new hub" 768 after

# Phase 3: the guest kills its bridge mid-session and starts another; the
# hub drops the orphaned session when the new HELLO arrives on it, QEMU
# connects again, and the new bridge opens guest-vcan0 (a third time).
serve_bridge 3 "the guest's second bridge connected after the first was killed" 832 killed

guest_ok=0
wait "$guest" && guest_ok=1
elapsed=$(($(date +%s) - start))
grep -aE '^(canseq|FIELDHUB-VM-RESULT)' "$RUN/guest.log" || true
[ "$guest_ok" = 1 ] || { tail -40 "$RUN/guest.log"; fail "the guest scenario did not report ok"; }
echo "test-bridge: host -> guest: canseq received $COUNT host frames in order, $AFTER_RESTART after the hub restart and $AFTER_RESTART after the bridge was killed"
after_check=$(awk -v n=$AFTER_RESTART -v base=384 -f "$ROOT/tests/vm/seq/check.awk" "$RUN/dump-after.log") \
    || fail "guest -> host after the restart: $after_check"
echo "test-bridge: guest -> host after the hub restart: $after_check"
killed_check=$(awk -v n=$AFTER_RESTART -v base=448 -f "$ROOT/tests/vm/seq/check.awk" "$RUN/dump-killed.log") \
    || fail "guest -> host after the bridge was killed: $killed_check"
echo "test-bridge: guest -> host after the bridge was killed: $killed_check"
echo "test-bridge: PASS (guest boot, both directions, error frames, hub restart, killed bridge and shutdown in ${elapsed} s)"
