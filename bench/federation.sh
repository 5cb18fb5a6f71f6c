#!/bin/sh
# Cross-hub figures of a federated channel (issue 20) between two Linux
# network namespaces joined by a veth pair, each next to a baseline of the
# same run:
#
#   round trip  relay client -> relay hub -> owner hub -> echo -> back   (`bench ping`/`bench echo`)
#               the same two clients on one hub's local channel         (hub baseline)
#               raw TCP ping-pong between the two namespaces             (link baseline)
#   throughput  `fieldhub gen -g 0` on the relay -> `dump --lossless` on the owner,
#               against the same on one hub's local channel
#
# Needs root (ip netns), python3 and target/release/fieldhub (FIELDHUB=path
# for another build). SAMPLES round trips (default 5000), FLOOD frames in the
# throughput runs (default 100000). Prints figures and ratios, and the sleeps
# (voluntary context switches, /proc/PID/task/*/status) each thread of both
# hubs took per relayed round trip, by hub and thread name: which hand-offs a
# round trip crossed. Asserts nothing about them. Run it under
# `flock /tmp/fieldhub-bench.lock` on a shared machine.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
FIELDHUB=${FIELDHUB:-${CARGO_TARGET_DIR:-$ROOT/target}/release/fieldhub}
SAMPLES=${SAMPLES:-5000}
FLOOD=${FLOOD:-100000}
fail() { echo "bench/federation.sh: $*" >&2; exit 1; }
[ -x "$FIELDHUB" ] || fail "$FIELDHUB missing; run make build"
command -v python3 >/dev/null || fail "python3 missing (the raw TCP baseline)"

TAG=fhb$$
A=${TAG}a
B=${TAG}b
RUN=$(mktemp -d /tmp/fieldhub-bench-federation.XXXXXX)
pids=""
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    ip netns del "$A" 2>/dev/null || true
    ip netns del "$B" 2>/dev/null || true
    rm -rf "$RUN"
}
trap cleanup EXIT INT TERM
ip netns add "$A" || fail "cannot make network namespaces (needs root)"
ip netns add "$B"
ip link add veth0 netns "$A" type veth peer name veth0 netns "$B"
ip -n "$A" addr add 10.77.1.1/24 dev veth0
ip -n "$B" addr add 10.77.1.2/24 dev veth0
for ns in "$A" "$B"; do ip -n "$ns" link set veth0 up; ip -n "$ns" link set lo up; done

hub() { # NAME NS CONFIG
    FIELDHUB_LOG=info ip netns exec "$2" "$FIELDHUB" hub --config "$3" --listen "unix:$RUN/$1.sock" --no-shm \
        --ready-file "$RUN/$1.ready" >"$RUN/$1.log" 2>&1 &
    pids="$pids $!"
    hubs="$hubs $1=$!" # `ip netns exec` execs the hub: the same process
}
hubs=""
# The links leave loopback, so the hubs share a token (owner-only file).
(umask 077; echo "bench-federation-$$" >"$RUN/federation.token")
cat >"$RUN/owner.toml" <<TOML
[hub]
name = "owner"
[federation]
listen = ["tcp/10.77.1.1:7447"]
token_file = "$RUN/federation.token"
[[channel]]
name = "body"
federated = true
[[channel]]
name = "local"
TOML
cat >"$RUN/relay.toml" <<TOML
[hub]
name = "relay"
[federation]
listen = ["tcp/10.77.1.2:7447"]
connect = ["tcp/10.77.1.1:7447"]
token_file = "$RUN/federation.token"
[[channel]]
name = "body"
federated = true
owner = "owner"
[[channel]]
name = "local"
TOML
hub owner "$A" "$RUN/owner.toml"
hub relay "$B" "$RUN/relay.toml"
for _ in $(seq 100); do grep -q "the owner is there" "$RUN/relay.log" 2>/dev/null && break; sleep 0.1; done
grep -q "the owner is there" "$RUN/relay.log" || fail "the relay never saw the owner: $(cat "$RUN/relay.log")"
OWNER=unix:$RUN/owner.sock
RELAY=unix:$RUN/relay.sock

p50() { python3 -c 'import json,sys; print(json.load(sys.stdin)["round_trip"]["p50_us"])'; }
ping_via() { # ECHO_HUB PING_HUB CHANNEL
    "$FIELDHUB" bench echo --hub "$1" --channel "$3" 2>/dev/null &
    echo_pid=$!
    sleep 0.5
    python3 "$RUN/threads.py" snap $hubs >"$RUN/$3.before"
    "$FIELDHUB" bench ping --hub "$2" --channel "$3" --samples "$SAMPLES" --json 2>/dev/null
    python3 "$RUN/threads.py" snap $hubs >"$RUN/$3.after"
    kill "$echo_pid"; wait "$echo_pid" 2>/dev/null || true
}

# Each hub thread's sleeps (voluntary context switches) and preemptions
# (involuntary ones): `snap HUB=PID...` prints them; `diff BEFORE AFTER N`
# prints their growth per round trip by hub and thread name (Zenoh's
# runtime threads are named app-0, acc-0, tx-0, rx-0, rx-1, net-0 and so on).
cat >"$RUN/threads.py" <<'PY'
import collections, json, os, sys
if sys.argv[1] == "snap":
    counts = {}
    for arg in sys.argv[2:]:
        hub, pid = arg.split("=")
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/status") as f:
                    status = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
            except OSError:
                continue
            counts[f"{hub}/{tid}"] = [status["Name"], int(status["voluntary_ctxt_switches"]),
                                      int(status["nonvoluntary_ctxt_switches"])]
    print(json.dumps(counts))
else:
    before, after = (json.load(open(p)) for p in sys.argv[2:4])
    n = int(sys.argv[4])
    slept, preempted = collections.Counter(), collections.Counter()
    for key, (name, vol, invol) in after.items():
        _, v0, i0 = before.get(key, (name, 0, 0))
        who = f"{key.split('/')[0]} {name}"
        slept[who] += vol - v0
        preempted[who] += invol - i0
    print(f"  {'hub thread':<28}{'sleeps':>9}{'preempted':>11}   (per relayed round trip)")
    for who, count in sorted(slept.items(), key=lambda kv: -kv[1]):
        if count or preempted[who]:
            print(f"  {who:<28}{count / n:9.2f}{preempted[who] / n:11.2f}")
    print(f"  {'all':<28}{sum(slept.values()) / n:9.2f}{sum(preempted.values()) / n:11.2f}")
PY

# Raw TCP: a one-byte ping-pong with TCP_NODELAY across the veth pair.
cat >"$RUN/raw.py" <<'PY'
import socket, statistics, sys, time
role, n = sys.argv[1], int(sys.argv[2])
if role == "server":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("10.77.1.1", 7500)); s.listen(1); c, _ = s.accept()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while (b := c.recv(1)):
        c.sendall(b)
else:
    for _ in range(50):
        try:
            c = socket.create_connection(("10.77.1.1", 7500)); break
        except OSError:
            time.sleep(0.1)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rtts = []
    for i in range(n + 200):
        t = time.perf_counter_ns(); c.sendall(b"x"); c.recv(1)
        if i >= 200:
            rtts.append((time.perf_counter_ns() - t) / 1000)
    print(statistics.median(rtts))
PY
ip netns exec "$A" python3 "$RUN/raw.py" server 0 &
pids="$pids $!"
RAW=$(ip netns exec "$B" python3 "$RUN/raw.py" client "$SAMPLES")

CROSS=$(ping_via "$OWNER" "$RELAY" body | p50)
LOCAL=$(ping_via "$RELAY" "$RELAY" local | p50)

flood() { # GEN_HUB DUMP_HUB CHANNEL -> frames/s
    "$FIELDHUB" dump --hub "$2" --lossless -n "$FLOOD" "$3" >/dev/null &
    dump=$!
    sleep 0.5
    start=$(date +%s.%N)
    "$FIELDHUB" gen --hub "$1" -g 0 -I 123 -L 8 -n "$FLOOD" "$3"
    wait "$dump"
    end=$(date +%s.%N)
    python3 -c "print(round($FLOOD / ($end - $start)))"
}
CROSS_FPS=$(flood "$RELAY" "$OWNER" body)
LOCAL_FPS=$(flood "$RELAY" "$RELAY" local)

python3 - "$RAW" "$CROSS" "$LOCAL" "$CROSS_FPS" "$LOCAL_FPS" <<'PY'
import sys
raw, cross, local, cross_fps, local_fps = (float(v) for v in sys.argv[1:])
print("federation over a veth pair between two network namespaces (p50 round trips, µs)")
print(f"  raw TCP ping-pong between the namespaces  {raw:9.1f}")
print(f"  one hub, local channel (ping -> echo)     {local:9.1f}")
print(f"  relay -> owner -> relay (ping -> echo)    {cross:9.1f}   {cross / raw:.1f} x raw TCP, {cross / local:.1f} x one hub")
print(f"  cross-hub round trip at 500 kbit/s        {cross / 2:9.1f} bit times (2 µs each)")
print("throughput, 8-byte frames, gen -g 0 -> dump --lossless (frames/s)")
print(f"  one hub, local channel                    {local_fps:9.0f}")
print(f"  relay -> owner                            {cross_fps:9.0f}   {cross_fps / local_fps:.2f} x one hub")
PY
echo "sleeps of the hubs' threads over the relayed round trips (warm-up included)"
python3 "$RUN/threads.py" diff "$RUN/body.before" "$RUN/body.after" "$((SAMPLES + 200))"
