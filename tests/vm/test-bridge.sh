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
awk -v n=$COUNT -v base=512 -v channel=can0 -f "$ROOT/tests/vm/seq/frames.awk" >"$RUN/host-frames.log"
(
    for _ in $(seq 900); do grep -q ' can0 100#' "$RUN/dump.log" 2>/dev/null && break; sleep 0.1; done
    "$FIELDHUB" replay --hub "unix:$SOCK" "$RUN/host-frames.log" >"$RUN/replay.log" 2>&1
) &
pids="$pids $!"

start=$(date +%s)
guest_ok=0
# The hub must listen before QEMU starts: its chardev connects at start.
"$ROOT/tests/vm/run-guest.sh" bridge -chardev "socket,path=$SOCK,id=fh,reconnect=1" \
    -device virtio-serial-pci -device virtserialport,chardev=fh,name=fieldhub >"$RUN/guest.log" 2>&1 && guest_ok=1
elapsed=$(($(date +%s) - start))
grep -E '^(canseq|FIELDHUB-VM-RESULT)' "$RUN/guest.log" || true

# Check the guest's frames as the host saw them.
host_check=$(awk -v n=$COUNT -v base=256 -f "$ROOT/tests/vm/seq/check.awk" "$RUN/dump.log") || fail "guest -> host: $host_check"
echo "test-bridge: guest -> host: $host_check"
[ "$guest_ok" = 1 ] || { tail -40 "$RUN/guest.log"; fail "host -> guest: the guest scenario did not report ok"; }
echo "test-bridge: host -> guest: canseq received $COUNT host frames in order"
echo "test-bridge: PASS (guest boot, both directions and shutdown in ${elapsed} s)"
