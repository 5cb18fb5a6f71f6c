#!/bin/sh
# Host driver for the "ivshmem" VM scenario (issue 8): guest clients and host
# clients share channel can0 through ivshmem regions the hub serves.
#
#   host hub --ivshmem A,B  <-memory-backend-file A, B-> QEMU ivshmem-plain x2
#     guest: fieldhub gen  --hub ivshmem://…/resource2 (device 1)  -> host dump
#     guest: fieldhub dump --hub ivshmem://…/resource2 (device 2)  <- host gen
#
# Checks: COUNT guest frames reach a host client in order, none lost (here);
# COUNT host frames reach the guest in order (the scenario). Exit status 0
# only if both pass. Needs target/release/fieldhub, qemu-system-x86_64,
# busybox-static, cpio (as test-bridge.sh).
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VM=${CARGO_TARGET_DIR:-$ROOT/target}/vm
FIELDHUB=${CARGO_TARGET_DIR:-$ROOT/target}/release/fieldhub
COUNT=${COUNT:-100000}
command -v qemu-system-x86_64 >/dev/null || { echo "test-ivshmem: qemu-system-x86_64 missing" >&2; exit 1; }

"$ROOT/tests/vm/build-initramfs.sh"
RUN=$(mktemp -d /dev/shm/fieldhub-vm.XXXXXX 2>/dev/null || mktemp -d "${TMPDIR:-/tmp}/fieldhub-vm.XXXXXX")
pids=""
cleanup() { for p in $pids; do kill "$p" 2>/dev/null || true; done; rm -rf "$RUN"; }
trap cleanup EXIT INT TERM
fail() { echo "test-ivshmem: FAIL: $*" >&2; exit 1; }

FIELDHUB_LOG=info "$FIELDHUB" hub --no-shm --listen "unix:$RUN/hub.sock" --ivshmem "$RUN/tx,$RUN/rx" >"$RUN/hub.log" 2>&1 &
pids="$pids $!"
for _ in $(seq 50); do [ -S "$RUN/hub.sock" ] && break; sleep 0.1; done
[ -S "$RUN/hub.sock" ] || fail "the hub did not start: $(cat "$RUN/hub.log")"

"$FIELDHUB" dump --lossless --hub "unix:$RUN/hub.sock" -n "$COUNT" can0,100:7FF >"$RUN/host-rx.log" 2>"$RUN/dump.err" &
dump=$!
pids="$pids $dump"
# The host sender starts once both guest clients are attached.
(
    for _ in $(seq 1200); do
        [ "$(grep -c 'client connected over ivshmem' "$RUN/hub.log")" -ge 2 ] && break
        sleep 0.1
    done
    "$FIELDHUB" gen --hub "unix:$RUN/hub.sock" -g 0 -I 200 -L 4 -D i -n "$COUNT" can0
) &
pids="$pids $!"

# TCG unless told otherwise (as run-guest.sh): /dev/kvm may exist without
# working, and a second vCPU keeps a TCG guest from booting here.
ACCEL=${VM_ACCEL:-tcg}
timeout "${VM_TIMEOUT:-110}" qemu-system-x86_64 -accel "$ACCEL" -m 512 -nographic -no-reboot \
    -kernel "$VM/vmlinuz" -initrd "$VM/initramfs.cpio.gz" \
    -append "console=ttyS0 quiet panic=-1 fieldhub.scenario=ivshmem" \
    -object "memory-backend-file,id=fhtx,share=on,mem-path=$RUN/tx,size=4M" -device ivshmem-plain,memdev=fhtx \
    -object "memory-backend-file,id=fhrx,share=on,mem-path=$RUN/rx,size=4M" -device ivshmem-plain,memdev=fhrx \
    </dev/null | tee "$RUN/guest.log" || true
grep -q 'FIELDHUB-VM-RESULT ok' "$RUN/guest.log" || fail "guest: $(grep FIELDHUB-VM-RESULT "$RUN/guest.log" || echo no result)"

wait "$dump" || fail "host dump: $(cat "$RUN/dump.err")"
awk -v n="$COUNT" 'BEGIN { for (i = 0; i < 256; i++) v[sprintf("%02X", i)] = i }
    { c = v[$4] + 256 * (v[$5] + 256 * (v[$6] + 256 * v[$7]))
      if (c != next_c) { print "frame " NR ": counter " c ", expected " next_c; exit 1 }
      next_c++ }
    END { if (next_c != n) { print "got " next_c " of " n; exit 1 }
          print "test-ivshmem: " n " guest frames reached the host in order" }' "$RUN/host-rx.log" \
    || fail "guest to host direction"
echo "test-ivshmem: ok"
