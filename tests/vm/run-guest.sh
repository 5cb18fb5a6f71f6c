#!/bin/sh
# Boot the test guest under QEMU (TCG: no KVM needed) and run one scenario.
#
# Usage: tests/vm/run-guest.sh SCENARIO [QEMU_ARG…]
#   SCENARIO    a directory name under tests/vm/scenarios/
#   QEMU_ARG    devices of the scenario, e.g. the hub's unix socket as the
#               virtio-serial port named `fieldhub` (as test-bridge.sh
#               passes it) or ivshmem-plain devices (test-ivshmem.sh)
# The guest console goes to stdout and target/vm/guest-SCENARIO.log; the
# scenario prints "FIELDHUB-VM-RESULT ok|fail DETAILS". Exit status: 0 only
# on "ok". Build the guest first: tests/vm/build-initramfs.sh.
# VM_ACCEL=kvm uses KVM where it works; VM_TIMEOUT bounds the guest (110 s);
# VM_APPEND adds words to the kernel command line (a scenario's arguments).
set -eu
[ $# -ge 1 ] || { echo "usage: run-guest.sh SCENARIO [QEMU_ARG…]" >&2; exit 2; }
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VM=${CARGO_TARGET_DIR:-$ROOT/target}/vm
SCENARIO=$1
shift
LOG=$VM/guest-$SCENARIO.log
# TCG by default: /dev/kvm may exist without working (nested, no VT-x), and
# a second vCPU keeps a TCG guest from booting here.
ACCEL=${VM_ACCEL:-tcg}

timeout "${VM_TIMEOUT:-110}" qemu-system-x86_64 -accel "$ACCEL" -m 512 -nographic -no-reboot \
    -kernel "$VM/vmlinuz" -initrd "$VM/initramfs.cpio.gz" \
    -append "console=ttyS0 quiet panic=-1 fieldhub.scenario=$SCENARIO ${VM_APPEND:-}" "$@" \
    </dev/null | tee "$LOG" || true
grep -q '^FIELDHUB-VM-RESULT ok' "$LOG"
