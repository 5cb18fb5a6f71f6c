#!/bin/sh
# Host driver for the "portable" VM scenario (issue 37): the portable C client
# (c/portable/tests/fhp_seq.c, static) in a QEMU guest with no network,
# over the virtio-serial port to a host hub on a unix socket:
#   guest fhp_seq -> 10,000 frames (family 0x180) -> host `fieldhub dump`, checked
#   in order by seq/check.awk; host `fieldhub replay` -> 10,000 frames (family
#   0x280) -> fhp_seq, which checks them in order.
#
# Needs target/release/fieldhub, qemu-system-x86_64, busybox-static, cpio.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
FIELDHUB=${CARGO_TARGET_DIR:-$ROOT/target}/release/fieldhub
COUNT=10000
for tool in qemu-system-x86_64 cpio; do
    command -v $tool >/dev/null || { echo "test-portable: $tool missing (make deps installs it)" >&2; exit 1; }
done

"$ROOT/tests/vm/build-initramfs.sh"
RUN=$(mktemp -d "${TMPDIR:-/tmp}/fieldhub-vm.XXXXXX")
SOCK=$RUN/hub.sock
pids=""
cleanup() { for p in $pids; do kill "$p" 2>/dev/null || true; done; rm -rf "$RUN"; }
trap cleanup EXIT INT TERM
fail() { echo "test-portable: FAIL: $*" >&2; exit 1; }
await() {
    what=$1
    shift
    for _ in $(seq 1200); do
        "$@" && return 0
        kill -0 "$guest" 2>/dev/null || { tail -20 "$RUN/guest.log"; fail "the guest ended before $what"; }
        sleep 0.1
    done
    fail "timed out waiting for $what"
}

cat >"$RUN/hub.toml" <<TOML
[[channel]]
name = "can0"
protocol = "canfd"
TOML
FIELDHUB_LOG=info "$FIELDHUB" hub --config "$RUN/hub.toml" --listen "unix:$SOCK" --no-shm >"$RUN/hub.log" 2>&1 &
pids="$pids $!"
for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
[ -S "$SOCK" ] || fail "the hub did not listen on $SOCK: $(cat "$RUN/hub.log")"
"$FIELDHUB" dump --hub "unix:$SOCK" -L --lossless -n $((2 * COUNT)) can0 >"$RUN/dump.log" 2>"$RUN/dump.err" &
dump=$!
pids="$pids $dump"

# The hub must listen before QEMU starts: its chardev connects at start.
"$ROOT/tests/vm/run-guest.sh" portable -chardev "socket,path=$SOCK,id=fh,reconnect=1" \
    -device virtio-serial-pci -device virtserialport,chardev=fh,name=fieldhub >"$RUN/guest.log" 2>&1 &
guest=$!
pids="$pids $guest"
await "the guest's port" grep -q 'port opened.*fhp-seq' "$RUN/hub.log"
awk -v n=$COUNT -v base=640 -v channel=can0 -f "$ROOT/tests/vm/seq/frames.awk" >"$RUN/frames.log"
"$FIELDHUB" replay --hub "unix:$SOCK" "$RUN/frames.log" >"$RUN/replay.log" 2>&1 || fail "replay: $(cat "$RUN/replay.log")"
wait "$guest" || { tail -20 "$RUN/guest.log"; fail "the guest's fhp_seq failed"; }
grep 'fhp_seq\|sent' "$RUN/guest.log" || true
wait "$dump" || fail "dump: $(cat "$RUN/dump.err")"
result=$(awk -v n=$COUNT -v base=384 -f "$ROOT/tests/vm/seq/check.awk" "$RUN/dump.log") ||
    fail "the guest's frames on the host: $result"
echo "test-portable: host dump of the guest's frames: $result"
echo "test-portable: ok"
