#!/bin/sh
# CPU of federated hubs under load (issue 20): three hubs in three Linux
# network namespaces, joined pairwise by veth links, share CHANNELS channels
# (default 10), each timed at 1 Mbit/s and owned round-robin by the three
# hubs. On every channel one `fieldhub gen -g 0` on a hub that is not its
# owner keeps the bus full (8-byte frames, as fast as the bus takes them), so
# every frame crosses a link to be sequenced and back to be applied.
#
# Prints, over SECONDS (default 10) after a warm-up: each hub's CPU (% of
# one core, from /proc), the frames each channel carried against its wire
# rate (1 Mbit/s / 111 bits = 9009 frames/s of 8-byte frames without stuff
# bits: the baseline of the same bus on one hub), and the CPU per 1,000
# frames/s. Needs root (ip netns) and target/release/fieldhub; asserts
# nothing. Run it under `flock /tmp/fieldhub-bench.lock` on a shared machine.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
FIELDHUB=${CARGO_TARGET_DIR:-$ROOT/target}/release/fieldhub
CHANNELS=${CHANNELS:-10}
SECONDS_=${SECONDS:-10}
fail() { echo "bench/federation_load.sh: $*" >&2; exit 1; }
[ -x "$FIELDHUB" ] || fail "$FIELDHUB missing; run make build"
command -v python3 >/dev/null || fail "python3 missing"

TAG=fhl$$
RUN=$(mktemp -d /tmp/fieldhub-bench-federation-load.XXXXXX)
pids=""
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    for h in 0 1 2; do ip netns del "$TAG$h" 2>/dev/null || true; done
    rm -rf "$RUN"
}
trap cleanup EXIT INT TERM
for h in 0 1 2; do
    ip netns add "$TAG$h" || fail "cannot make network namespaces (needs root)"
    ip -n "$TAG$h" link set lo up
done
# Link L joins hubs I and J on 10.79.L.0/24 (.I+1 and .J+1).
link() { # L I J
    ip link add "l$1" netns "$TAG$2" type veth peer name "l$1" netns "$TAG$3"
    ip -n "$TAG$2" addr add "10.79.$1.$(($2 + 1))/24" dev "l$1"
    ip -n "$TAG$3" addr add "10.79.$1.$(($3 + 1))/24" dev "l$1"
    ip -n "$TAG$2" link set "l$1" up
    ip -n "$TAG$3" link set "l$1" up
}
link 1 0 1
link 2 0 2
link 3 1 2
(umask 077; echo "bench-federation-load-$$" >"$RUN/token")

channels() { # HUB: the [[channel]] tables as hub HUB sees them
    c=0
    while [ "$c" -lt "$CHANNELS" ]; do
        owner=$((c % 3))
        printf '[[channel]]\nname = "c%d"\nfederated = true\n' "$c"
        if [ "$owner" -eq "$1" ]; then
            printf 'timing = "timed"\nbitrate = 1000000\n'
        else
            printf 'owner = "hub%d"\n' "$owner"
        fi
        c=$((c + 1))
    done
}
config() { # HUB LISTEN CONNECT
    printf '[hub]\nname = "hub%d"\n[federation]\nlisten = [%s]\nconnect = [%s]\ntoken_file = "%s"\n' \
        "$1" "$2" "$3" "$RUN/token"
    channels "$1"
}
config 0 '"tcp/10.79.1.1:7447", "tcp/10.79.2.1:7447"' '' >"$RUN/hub0.toml"
config 1 '"tcp/10.79.1.2:7447", "tcp/10.79.3.2:7447"' '"tcp/10.79.1.1:7447"' >"$RUN/hub1.toml"
config 2 '"tcp/10.79.2.3:7447", "tcp/10.79.3.3:7447"' '"tcp/10.79.2.1:7447", "tcp/10.79.3.2:7447"' >"$RUN/hub2.toml"
hub_pids=""
for h in 0 1 2; do
    FIELDHUB_LOG=info ip netns exec "$TAG$h" "$FIELDHUB" hub --config "$RUN/hub$h.toml" \
        --listen "unix:$RUN/hub$h.sock" --no-shm >"$RUN/hub$h.log" 2>&1 &
    pids="$pids $!"
    hub_pids="$hub_pids $!"
done
for h in 1 2; do
    for _ in $(seq 200); do
        [ "$(grep -c "the owner is there" "$RUN/hub$h.log" 2>/dev/null)" -ge $((CHANNELS * 2 / 3)) ] && break
        sleep 0.1
    done
done
sleep 1
c=0
while [ "$c" -lt "$CHANNELS" ]; do
    sender=$(((c + 1) % 3))
    "$FIELDHUB" gen --hub "unix:$RUN/hub$sender.sock" -g 0 -I 123 -L 8 -D i "c$c" >/dev/null 2>&1 &
    pids="$pids $!"
    c=$((c + 1))
done
sleep 3

# jiffies of each hub, frames of each channel (at its owner), then again.
sample() {
    for p in $hub_pids; do awk '{print $14 + $15}' "/proc/$p/stat"; done | tr '\n' ' '
    echo
    for h in 0 1 2; do "$FIELDHUB" stats --hub "unix:$RUN/hub$h.sock" --json; done |
        python3 -c '
import json, sys
text, frames, at = sys.stdin.read(), {}, 0
decoder = json.JSONDecoder()
while text[at:].strip():
    stats, at = decoder.raw_decode(text, text.index("{", at))
    for c in stats["channels"]:
        f = c.get("federation") or {}
        if f.get("role") == "owner":
            frames[c["name"]] = c["frames"]
print(json.dumps(frames))'
}
BEFORE=$(sample)
sleep "$SECONDS_"
AFTER=$(sample)
python3 - "$SECONDS_" "$(getconf CLK_TCK)" "$CHANNELS" "$BEFORE" "$AFTER" <<'PY'
import json, sys
seconds, tck, channels = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
def parse(text):
    cpu, frames = text.split("\n", 1)
    return [int(j) for j in cpu.split()], json.loads(frames)
(c0, f0), (c1, f1) = parse(sys.argv[4]), parse(sys.argv[5])
rates = {name: (f1[name] - f0[name]) / seconds for name in f1}
total = sum(rates.values())
wire = 1_000_000 / 111
print(f"federation load: {channels} channels x 3 hubs, each channel timed at 1 Mbit/s and kept full")
print(f"  frames/s per channel (owner's count)  min {min(rates.values()):7.0f}  max {max(rates.values()):7.0f}"
      f"   wire rate of 8-byte frames {wire:7.0f} (one hub's baseline)")
print(f"  all channels                          {total:7.0f} frames/s  ({total / (wire * channels):.2f} x the wire rate)")
for h in range(3):
    cpu = (c1[h] - c0[h]) / tck / seconds * 100
    print(f"  hub{h} CPU                              {cpu:6.1f} % of one core"
          f"   {cpu / (total / 1000):.2f} % per 1,000 frames/s")
PY
