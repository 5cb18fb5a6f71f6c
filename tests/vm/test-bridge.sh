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
# Prints throughput both ways. Exit status 0 only if both directions pass.
#
# Needs target/release/fieldhub, qemu-system-x86_64, busybox-static, cpio.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VM=${CARGO_TARGET_DIR:-$ROOT/target}/vm
FIELDHUB=${CARGO_TARGET_DIR:-$ROOT/target}/release/fieldhub
COUNT=10000
export COUNT
for tool in qemu-system-x86_64 cpio; do
    command -v $tool >/dev/null || { echo "test-bridge: $tool missing (make test-vm installs it)" >&2; exit 1; }
done

"$ROOT/tests/vm/build-initramfs.sh"
RUN=$(mktemp -d "${TMPDIR:-/tmp}/fieldhub-vm.XXXXXX")
SOCK=$RUN/hub.sock
pids=""
cleanup() { for p in $pids; do kill "$p" 2>/dev/null || true; done; rm -rf "$RUN"; }
trap cleanup EXIT INT TERM
fail() { echo "test-bridge: FAIL: $*" >&2; exit 1; }

cat >"$RUN/hub.toml" <<TOML
[hub]
name = "vm-test"

[[channel]]
name = "can0"
protocol = "canfd"
TOML
FIELDHUB_LOG=warn "$FIELDHUB" hub --config "$RUN/hub.toml" --listen "unix:$SOCK" >"$RUN/hub.log" 2>&1 &
pids="$pids $!"
for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
[ -S "$SOCK" ] || fail "the hub did not listen on $SOCK: $(cat "$RUN/hub.log")"

# Host receiver: every frame on can0, candump log format.
"$FIELDHUB" dump --hub "unix:$SOCK" -L can0 >"$RUN/dump.log" 2>"$RUN/dump.err" &
pids="$pids $!"

# Host sender: the 0x200 family as canseq expects it, 200 us apart, replayed
# once the guest's first frame shows that canseq's socket is open.
awk -v n=$COUNT 'BEGIN {
    for (i = 0; i < n; i++) {
        k = i % 3; len = (k == 0) ? 8 : (k == 1) ? 64 : 12
        data = sprintf("%08X", i)
        for (j = 4; j < len; j++) data = data sprintf("%02X", (i + j) % 256)
        if (k == 0) frame = "200#" data
        else if (k == 1) frame = "1F000200##1" data
        else frame = "201##0" data
        printf "(%d.%06d) can0 %s\n", i / 5000, (i % 5000) * 200, frame
    }
}' >"$RUN/host-frames.log"
(
    for _ in $(seq 900); do grep -q ' can0 100#' "$RUN/dump.log" 2>/dev/null && break; sleep 0.1; done
    "$FIELDHUB" replay --hub "unix:$SOCK" "$RUN/host-frames.log" >"$RUN/replay.log" 2>&1
) &
pids="$pids $!"

start=$(date +%s)
guest_ok=0
"$ROOT/tests/vm/run-guest.sh" bridge "$SOCK" >"$RUN/guest.log" 2>&1 && guest_ok=1
elapsed=$(($(date +%s) - start))
grep -E '^(canseq|FIELDHUB-VM-RESULT)' "$RUN/guest.log" || true

# Check the guest's frames as the host saw them.
host_check=$(awk -v n=$COUNT '
    $3 ~ /^(100|101|1F000100)#/ {
        split($3, part, "#"); id = part[1]
        data = (substr($3, length(id) + 2, 1) == "#") ? substr($3, length(id) + 4) : part[2]
        k = got % 3
        want_id = (k == 0) ? "100" : (k == 1) ? "1F000100" : "101"
        want_len = (k == 0) ? 8 : (k == 1) ? 64 : 12
        want = sprintf("%08X", got)
        for (j = 4; j < want_len; j++) want = want sprintf("%02X", (got + j) % 256)
        if (id != want_id || data != want) { printf "frame %d: got %s, want %s#%s\n", got, $3, want_id, want; bad = 1; exit }
        if (got == 0) { first = substr($1, 2) + 0 }
        last = substr($1, 2) + 0; got++
    }
    END {
        if (bad) exit 1
        if (got != n) { printf "received %d of %d guest frames\n", got, n; exit 1 }
        span = last - first
        printf "host received %d guest frames in order in %.3f s (%.0f frames/s)\n", got, span, (span > 0) ? got / span : 0
    }' "$RUN/dump.log") || fail "guest -> host: $host_check"
echo "test-bridge: guest -> host: $host_check"
[ "$guest_ok" = 1 ] || { tail -40 "$RUN/guest.log"; fail "host -> guest: the guest scenario did not report ok"; }
echo "test-bridge: host -> guest: canseq received $COUNT host frames in order"
echo "test-bridge: PASS (guest boot, both directions and shutdown in ${elapsed} s)"
