#!/bin/sh
# Guest <-> host figures of a QEMU guest (TCG, as in CI) on the bus, each
# next to the host-only figure of the same run and hub:
#
#   round trip  host shm client -> hub -> ivshmem        -> guest echo -> back
#               host shm client -> hub -> virtio-serial  -> guest echo -> back
#               host shm client -> hub -> host shm echo                -> back  (baseline)
#   throughput  guest `fieldhub gen -g 0` (8-byte frames) -> ivshmem -> hub -> host dump
#
# Needs target/release/fieldhub and what `make test-vm` installs
# (qemu-system-x86, busybox-static, cpio, xz-utils). SAMPLES round trips per
# path (default 2000), FLOOD frames in the throughput run (default 200000).
# Prints figures; asserts nothing about them (it fails only if a path does
# not work at all).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
FIELDHUB=${CARGO_TARGET_DIR:-$ROOT/target}/release/fieldhub
SAMPLES=${SAMPLES:-2000}
FLOOD=${FLOOD:-200000}
for tool in qemu-system-x86_64 cpio busybox; do
    command -v $tool >/dev/null || { echo "bench/vm.sh: $tool missing; run make test-vm once (it installs the VM tools)" >&2; exit 1; }
done
[ -x "$FIELDHUB" ] || { echo "bench/vm.sh: $FIELDHUB missing; run make build" >&2; exit 1; }
FIELDHUB_BIN="$FIELDHUB" "$ROOT/tests/vm/build-initramfs.sh" >&2

RUN=$(mktemp -d /dev/shm/fieldhub-bench-vm.XXXXXX)
SHM=bench-vm-$$
pids=""
cleanup() { for p in $pids; do kill "$p" 2>/dev/null || true; done; pkill -KILL -f "fieldhub.scenario=bench" 2>/dev/null || true; rm -rf "$RUN"; }
trap cleanup EXIT INT TERM
fail() { echo "bench/vm.sh: $*" >&2; exit 1; }

cat >"$RUN/hub.toml" <<TOML
[hub]
name = "bench-vm"
ivshmem = ["$RUN/echo", "$RUN/flood"]

[[channel]]
name = "vm-ivshmem"

[[channel]]
name = "vm-serial"

[[channel]]
name = "vm-flood"

[[channel]]
name = "host"
TOML
FIELDHUB_LOG=info "$FIELDHUB" hub --config "$RUN/hub.toml" --listen "unix:$RUN/hub.sock" --shm "$SHM" >"$RUN/hub.log" 2>&1 &
pids="$pids $!"
for _ in $(seq 50); do [ -S "$RUN/hub.sock" ] && break; sleep 0.1; done
[ -S "$RUN/hub.sock" ] || fail "the hub did not start: $(cat "$RUN/hub.log")"
HUB=shm://$SHM

# The host-only baseline first, while the guest is not running yet.
"$FIELDHUB" bench echo --hub "$HUB" --channel host 2>/dev/null &
host_echo=$!
pids="$pids $host_echo"
sleep 0.5
"$FIELDHUB" bench ping --hub "$HUB" --channel host --samples "$SAMPLES" --json 2>/dev/null >"$RUN/host.json"
kill "$host_echo"

"$FIELDHUB" dump --lossless -L --hub "$HUB" -n "$FLOOD" vm-flood >"$RUN/flood.log" 2>"$RUN/flood.err" &
flood_dump=$!
pids="$pids $flood_dump"
echo "bench/vm.sh: booting the guest (TCG)" >&2
"$ROOT/tests/vm/run-guest.sh" bench \
    -object "memory-backend-file,id=fhecho,share=on,mem-path=$RUN/echo,size=4M" -device ivshmem-plain,memdev=fhecho \
    -object "memory-backend-file,id=fhflood,share=on,mem-path=$RUN/flood,size=4M" -device ivshmem-plain,memdev=fhflood \
    -chardev "socket,path=$RUN/hub.sock,id=fh,reconnect=1" \
    -device virtio-serial-pci -device virtserialport,chardev=fh,name=fieldhub >"$RUN/guest.log" 2>&1 &
pids="$pids $!"
wait "$flood_dump" || fail "the flood did not arrive: $(cat "$RUN/flood.err"; tail -5 "$RUN/guest.log")"

# Both guest echoes are up once the hub has seen them open their ports; a
# ping that starts before a port's filter is set loses its first request,
# so a failed ping is tried again.
ping_guest() {
    for _ in 1 2 3 4 5; do
        "$FIELDHUB" bench ping --hub "$HUB" --channel "$1" --samples "$SAMPLES" --json 2>/dev/null >"$RUN/$1.json" && return 0
        sleep 1
    done
    fail "no answer from the guest's echo on $1: $(tail -5 "$RUN/guest.log")"
}
for _ in $(seq 300); do grep -q 'bench: echoing' "$RUN/guest.log" && break; sleep 0.1; done
ping_guest vm-ivshmem
ping_guest vm-serial

python3 - "$RUN" "$FLOOD" <<'PY'
import json, sys
run, flood = sys.argv[1], int(sys.argv[2])
host = json.load(open(f"{run}/host.json"))["round_trip"]
rows = [("host shm <-> hub <-> host shm (baseline)", host)]
for channel, label in (("vm-ivshmem", "host shm <-> hub <-> ivshmem <-> guest"),
                       ("vm-serial", "host shm <-> hub <-> virtio-serial <-> guest")):
    rows.append((label, json.load(open(f"{run}/{channel}.json"))["round_trip"]))
print(f"round trip, 8-byte CAN, {host['samples']} samples each (µs; ratio = p50 / baseline p50)")
print(f"  {'':46} {'p50':>8} {'p95':>8} {'p99':>8} {'p99.9':>8} {'max':>9} {'mean':>8} {'ratio':>7}")
for label, d in rows:
    print(f"  {label:46} {d['p50_us']:8.1f} {d['p95_us']:8.1f} {d['p99_us']:8.1f} {d['p999_us']:8.1f}"
          f" {d['max_us']:9.1f} {d['mean_us']:8.1f} {d['p50_us'] / host['p50_us']:7.2f}")
stamps = [float(line.split()[0].strip("()")) for line in open(f"{run}/flood.log")]
counters = [int.from_bytes(bytes.fromhex(line.split()[2].split("#")[1])[:4], "little") for line in open(f"{run}/flood.log")]
assert counters == list(range(flood)), "the flood arrived out of order or incomplete"
span = stamps[-1] - stamps[0]
rate = (flood - 1) / span
print(f"\nthroughput guest -> host over ivshmem, 8-byte CAN frames, {flood} in order")
print(f"  {rate:,.0f} frames/s, {rate * 64 / 1e6:.1f} Mbit/s payload,"
      f" {rate * 111 / 1e6:.1f} Mbit/s as CAN bus time (111 bits a frame, no stuff bits)")
PY
