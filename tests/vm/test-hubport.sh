#!/bin/sh
# Host driver for the "hubport" VM scenario: inside the guest, a hub opens
# vcan0 itself (`[[port]] socketcan = "vcan0"`) and a SocketCAN application
# and hub clients exchange 10,000 sequence-numbered frames each way, classic
# and CAN FD, in order; then vcan0 is deleted and created again (an adapter
# unplugged and plugged back), the hub reopens it, and 2,000 more pass each
# way (the guest checks both directions and reports).
#
# Needs $FIELDHUB_BIN (or target/release/fieldhub), qemu-system-x86_64, busybox-static, cpio.
set -eu
NAME=test-hubport
. "$(dirname "$0")/lib.sh"
need qemu-system-x86_64

"$ROOT/tests/vm/build-initramfs.sh"
start=$(date +%s)
if "$ROOT/tests/vm/run-guest.sh" hubport >"${TMPDIR:-/tmp}/fieldhub-hubport.$$.log" 2>&1; then
    grep '^FIELDHUB-VM-RESULT' "${TMPDIR:-/tmp}/fieldhub-hubport.$$.log"
    rm -f "${TMPDIR:-/tmp}/fieldhub-hubport.$$.log"
    echo "test-hubport: PASS (guest boot, both directions, replug and shutdown in $(($(date +%s) - start)) s)"
else
    tail -40 "${TMPDIR:-/tmp}/fieldhub-hubport.$$.log"
    rm -f "${TMPDIR:-/tmp}/fieldhub-hubport.$$.log"
    echo "test-hubport: FAIL: the guest scenario did not report ok" >&2
    exit 1
fi
