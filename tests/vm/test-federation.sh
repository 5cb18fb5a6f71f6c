#!/bin/sh
# Host driver for the "federation" VM scenario (issue 20): an owner hub
# (host1) and a relay (host2) on the host, a relay in the guest whose link
# drops 1 % of its packets and delays all by 2 ms (netem, inside the guest:
# the host kernel has no sch_netem). Once the guest's READY is committed,
# host1's and host2's clients replay COUNT numbered frames each (families
# 0x200 and 0x300) while the guest replays its own (0x100). Every hub's
# lossless dump must hold the same 1 + 3 x COUNT frames in the same order,
# each family complete and in order: order and completeness survive the
# impaired link.
#
# Needs $FIELDHUB_BIN (or target/release/fieldhub), qemu-system-x86_64, busybox-static, cpio,
# iproute2's tc (copied into the guest).
set -eu
NAME=test-federation
. "$(dirname "$0")/lib.sh"
SEQ=$ROOT/tests/vm/seq
COUNT=${COUNT:-2000}
need qemu-system-x86_64

"$ROOT/tests/vm/build-initramfs.sh"
start_run
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
OWNER_PORT=$(free_port)
RELAY_PORT=$(free_port)
(umask 077; echo "vm-federation-test-secret" >"$RUN/token")
hub() { # NAME LISTEN CONNECT OWNER_LINE
    cat >"$RUN/$1.toml" <<TOML
[hub]
name = "$1"
listen = ["unix:$RUN/$1.sock"]
[federation]
listen = ["tcp/127.0.0.1:$2"]
connect = [$3]
token_file = "$RUN/token"
[[channel]]
name = "body"
protocol = "canfd"
federated = true
$4
TOML
    FIELDHUB_LOG=info "$FIELDHUB" hub --no-shm --config "$RUN/$1.toml" >"$RUN/$1.log" 2>&1 &
    pids="$pids $!"
}
hub host1 "$OWNER_PORT" "" ""
hub host2 "$RELAY_PORT" "\"tcp/127.0.0.1:$OWNER_PORT\"" 'owner = "host1"'
for _ in $(seq 100); do grep -q 'the owner is there' "$RUN/host2.log" 2>/dev/null && break; sleep 0.1; done
grep -q 'the owner is there' "$RUN/host2.log" || { cat "$RUN/host1.log" "$RUN/host2.log"; fail "host2 never saw host1"; }

total=$((1 + 3 * COUNT))
for h in host1 host2; do
    "$FIELDHUB" dump --hub "unix:$RUN/$h.sock" --lossless -n "$total" -L body >"$RUN/$h.dump" 2>"$RUN/$h.dump.err" &
    eval "dump_$h=$!"
done
# Each host hub's client replays its family once the guest's READY is committed.
base=512
for h in host1 host2; do
    awk -v n="$COUNT" -v base=$base -v channel=body -f "$SEQ/frames.awk" >"$RUN/$h.frames"
    (
        for _ in $(seq 1800); do grep -q ' body 7FE#' "$RUN/$h.dump" && break; sleep 0.1; done
        "$FIELDHUB" replay --hub "unix:$RUN/$h.sock" --timeout 60 "$RUN/$h.frames" >"$RUN/$h.replay" 2>&1
    ) &
    pids="$pids $!"
    base=$((base + 256))
done

start=$(date +%s)
VM_TIMEOUT=${VM_TIMEOUT:-240} VM_APPEND="fieldhub.owner=10.0.2.2:$OWNER_PORT fieldhub.count=$COUNT" \
    "$ROOT/tests/vm/run-guest.sh" federation -netdev user,id=n0 -device virtio-net-pci,netdev=n0 \
    >"$RUN/guest.log" 2>&1 || {
    tail -40 "$RUN/guest.log"
    for log in "$RUN"/host1.log "$RUN"/host2.log; do tail -n 5 "$log"; done
    echo "test-federation: FAIL: the guest scenario did not report ok" >&2
    exit 1
}
result=$(grep '^FIELDHUB-VM-RESULT' "$RUN/guest.log")
echo "$result"
guest_md5=$(echo "$result" | sed -n 's/.* md5=\([0-9a-f]*\).*/\1/p')
for h in host1 host2; do
    eval "wait \$dump_$h" || { cat "$RUN/$h.dump.err"; fail "$h's dump ended early"; }
    for family in 256 512 768; do
        awk -v n="$COUNT" -v base=$family -f "$SEQ/check.awk" "$RUN/$h.dump" >/dev/null ||
            { awk -v n="$COUNT" -v base=$family -f "$SEQ/check.awk" "$RUN/$h.dump"; fail "family $family on $h"; }
    done
    md5=$(awk '{print $3}' "$RUN/$h.dump" | md5sum | cut -d' ' -f1)
    [ "$md5" = "$guest_md5" ] || { fail "$h saw another order than the guest ($md5, guest $guest_md5)"; }
done
echo "test-federation: PASS ($total frames, one order on the three hubs across a link with 2 ms delay and 1 % loss, $(($(date +%s) - start)) s)"
