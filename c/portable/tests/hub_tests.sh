#!/bin/sh
# Start a hub (can0: CAN FD, can1: classic CAN; with a token for the token
# test) on a random loopback port and run one fhp_tests test against it.
#
#   hub_tests.sh FIELDHUB_BIN FHP_TESTS TEST
set -eu
FIELDHUB=$1
TESTS=$2
TEST=$3
RUN=$(mktemp -d "${TMPDIR:-/tmp}/fhp-hub.XXXXXX")
hub=""
cleanup() { [ -z "$hub" ] || kill "$hub" 2>/dev/null || true; rm -rf "$RUN"; }
trap cleanup EXIT INT TERM

cat >"$RUN/hub.toml" <<TOML
[[channel]]
name = "can0"
protocol = "canfd"

[[channel]]
name = "can1"
protocol = "can"
TOML
set -- --config "$RUN/hub.toml" --listen 127.0.0.1:0 --no-shm --ready-file "$RUN/ready.json"
if [ "$TEST" = a_token_is_proved_and_a_wrong_one_refused ]; then
    (umask 077 && echo "the-real-token" >"$RUN/token")
    set -- "$@" --token-file "$RUN/token"
fi
"$FIELDHUB" hub "$@" >"$RUN/hub.log" 2>&1 &
hub=$!
for _ in $(seq 600); do [ -s "$RUN/ready.json" ] && break; sleep 0.1; done
[ -s "$RUN/ready.json" ] || { echo "hub_tests: the hub did not start: $(cat "$RUN/hub.log")" >&2; exit 1; }
URL=$(sed 's/.*"tcp":\["\([^"]*\)".*/\1/' "$RUN/ready.json")
case $URL in tcp://*) ;; *) URL="tcp://$URL" ;; esac
"$TESTS" "$TEST" "$URL"
