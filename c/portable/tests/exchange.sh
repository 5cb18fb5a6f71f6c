#!/bin/sh
# 10,000 numbered frames each way between the portable C client (fhp_seq)
# and the Rust CLI through a real hub on Linux, over TCP:
#   fhp_seq sends the family 0x100 (classic and CAN FD), `fieldhub dump -L`
#   receives it and tests/vm/seq/check.awk checks it complete and in order;
#   `fieldhub replay` sends the family 0x200, fhp_seq checks it likewise.
#
#   exchange.sh FIELDHUB_BIN FHP_SEQ [COUNT [RUNNER...]]
#
# RUNNER runs FHP_SEQ (wine_exchange.sh passes wine64 and a Windows build).
set -eu
FIELDHUB=$1
SEQ=$2
COUNT=${3:-10000}
shift 2
[ $# -eq 0 ] || shift
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
RUN=$(mktemp -d "${TMPDIR:-/tmp}/fhp-exchange.XXXXXX")
pids=""
cleanup() { for p in $pids; do kill "$p" 2>/dev/null || true; done; rm -rf "$RUN"; }
trap cleanup EXIT INT TERM
fail() { echo "exchange: FAIL: $*" >&2; exit 1; }
# wait_for WHAT COMMAND...: up to 60 s (a hang guard, not a measure).
wait_for() {
    what=$1
    shift
    for _ in $(seq 600); do "$@" && return 0; sleep 0.1; done
    fail "timed out waiting for $what"
}

cat >"$RUN/hub.toml" <<TOML
[[channel]]
name = "can0"
protocol = "canfd"
TOML
FIELDHUB_LOG=info "$FIELDHUB" hub --config "$RUN/hub.toml" --listen 127.0.0.1:0 --no-shm \
    --ready-file "$RUN/ready.json" >"$RUN/hub.log" 2>&1 &
pids="$pids $!"
wait_for "the hub" test -s "$RUN/ready.json"
URL=$(sed 's/.*"tcp":\["\([^"]*\)".*/\1/' "$RUN/ready.json")
case $URL in tcp://*) ;; *) URL="tcp://$URL" ;; esac

"$FIELDHUB" dump --hub "$URL" -L --lossless --port dumper -n $((2 * COUNT)) can0 >"$RUN/dump.log" 2>"$RUN/dump.err" &
dump=$!
pids="$pids $dump"
wait_for "dump's port" grep -q 'port=dumper' "$RUN/hub.log"

"$@" "$SEQ" "$URL" can0 "$COUNT" 256 512 >"$RUN/seq.out" 2>"$RUN/seq.err" &
seq_pid=$!
pids="$pids $seq_pid"
wait_for "fhp_seq's port" grep -q ready "$RUN/seq.out"

awk -v n="$COUNT" -v base=512 -v channel=can0 -f "$ROOT/tests/vm/seq/frames.awk" >"$RUN/frames.log"
"$FIELDHUB" replay --hub "$URL" "$RUN/frames.log" >"$RUN/replay.log" 2>&1 || fail "replay: $(cat "$RUN/replay.log")"
wait "$seq_pid" || fail "fhp_seq: $(cat "$RUN/seq.err")"
cat "$RUN/seq.out"
wait "$dump" || fail "dump: $(cat "$RUN/dump.err")"
result=$(awk -v n="$COUNT" -v base=256 -f "$ROOT/tests/vm/seq/check.awk" "$RUN/dump.log") ||
    fail "fieldhub dump did not get fhp_seq's frames in order: $result"
echo "fieldhub dump: $result"
echo "exchange: ok"
