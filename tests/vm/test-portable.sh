#!/bin/sh
# Host driver for the "portable" VM scenario (issue 37): the portable C client
# (c/portable/tests/fhp_seq.c, static) in a QEMU guest with no network,
# over the virtio-serial port to a host hub on a unix socket:
#   guest fhp_seq -> 10,000 frames (family 0x180) -> host `fieldhub dump`, checked
#   in order by seq/check.awk; host `fieldhub replay` -> 10,000 frames (family
#   0x280) -> fhp_seq, which checks them in order.
#
# Needs $FIELDHUB_BIN (or target/release/fieldhub), qemu-system-x86_64, busybox-static, cpio.
set -eu
NAME=test-portable
. "$(dirname "$0")/lib.sh"
COUNT=10000
need qemu-system-x86_64 cpio

"$ROOT/tests/vm/build-initramfs.sh"
start_run
SOCK=$RUN/hub.sock

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
