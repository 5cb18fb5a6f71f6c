#!/bin/sh
# Boot the test guest under QEMU (TCG: no KVM needed) and run one scenario.
#
# Usage: tests/vm/run-guest.sh SCENARIO HUB_SOCKET
#   SCENARIO    a directory name under tests/vm/scenarios/
#   HUB_SOCKET  the hub's unix socket (`fieldhub hub --listen unix:PATH`);
#               the hub must already listen: QEMU connects when it starts.
# The guest console goes to stdout; the scenario prints
# "FIELDHUB-VM-RESULT ok|fail DETAILS". Exit status: 0 only on "ok".
# Build the guest first: tests/vm/build-initramfs.sh.
set -eu
[ $# -eq 2 ] || { echo "usage: run-guest.sh SCENARIO HUB_SOCKET" >&2; exit 2; }
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VM=${CARGO_TARGET_DIR:-$ROOT/target}/vm
LOG=$VM/guest-$1.log
# TCG by default: /dev/kvm may exist without working (nested, no VT-x).
ACCEL=${VM_ACCEL:-tcg}

timeout "${VM_TIMEOUT:-110}" qemu-system-x86_64 -accel "$ACCEL" -m 512 -nographic -no-reboot \
    -kernel "$VM/vmlinuz" -initrd "$VM/initramfs.cpio.gz" \
    -append "console=ttyS0 quiet panic=-1 fieldhub.scenario=$1" \
    -chardev "socket,path=$2,id=fh,reconnect=1" \
    -device virtio-serial-pci -device virtserialport,chardev=fh,name=fieldhub \
    </dev/null | tee "$LOG" || true
grep -q '^FIELDHUB-VM-RESULT ok' "$LOG"
