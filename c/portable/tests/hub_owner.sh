#!/bin/sh
# Another local user, nobody (through setpriv, as the hostile_input tests
# become it), listens on a loopback port and on a unix socket where a client
# is pointed: fhp_tests must refuse both before sending anything, naming the
# user, and the listener must receive no byte on any connection.
#
#   hub_owner.sh FHP_TESTS
set -eu
TESTS=$1
# The system's python (make deps), which nobody can run; a pyenv's under /root it cannot.
PYTHON=/usr/bin/python3
if [ "$(id -u)" != 0 ]; then
    echo "hub_owner.sh: becoming the other user nobody (setpriv) needs root: run make test-c as root" >&2
    exit 1
fi
RUN=$(mktemp -d "${TMPDIR:-/tmp}/fhp-owner.XXXXXX")
listener=""
cleanup() { [ -z "$listener" ] || kill "$listener" 2>/dev/null || true; rm -rf "$RUN"; }
trap cleanup EXIT INT TERM
chmod 711 "$RUN"
mkdir "$RUN/nobody"
chown nobody "$RUN/nobody"

# Accept on both, count each connection's bytes, say so when it closes.
setpriv --reuid=nobody --regid=nogroup --clear-groups "$PYTHON" -c '
import selectors, socket, sys
tcp = socket.socket()
tcp.bind(("127.0.0.1", 0))
tcp.listen()
unix = socket.socket(socket.AF_UNIX)
unix.bind(sys.argv[1])
unix.listen()
print(tcp.getsockname()[1], flush=True)
watch = selectors.DefaultSelector()
for listening in (tcp, unix):
    watch.register(listening, selectors.EVENT_READ)
received = {}
while True:
    for key, _ in watch.select():
        s = key.fileobj
        if s in (tcp, unix):
            connection, _ = s.accept()
            received[connection] = 0
            watch.register(connection, selectors.EVENT_READ)
            continue
        data = s.recv(4096)
        if data:
            received[s] += len(data)
        else:
            print("closed after", received.pop(s), "bytes", flush=True)
            watch.unregister(s)
            s.close()
' "$RUN/nobody/hub.sock" >"$RUN/listener.out" 2>"$RUN/listener.err" &
listener=$!
for _ in $(seq 300); do [ -s "$RUN/listener.out" ] && break; sleep 0.1; done
PORT=$(head -n 1 "$RUN/listener.out")
[ -n "$PORT" ] || { echo "hub_owner.sh: nobody's listener did not start: $(cat "$RUN/listener.err")" >&2; exit 1; }

"$TESTS" another_users_listener_is_refused_naming_it "tcp://127.0.0.1:$PORT" "$RUN/nobody/hub.sock"

# Five connections: two refused, one refused for an unknown FIELDHUB_HUB_USER, two trusted and closed unused.
for _ in $(seq 300); do [ "$(grep -c 'closed after' "$RUN/listener.out")" -ge 5 ] && break; sleep 0.1; done
[ "$(grep -c 'closed after' "$RUN/listener.out")" -eq 5 ] || {
    echo "hub_owner.sh: expected 5 connections to end: $(cat "$RUN/listener.out")" >&2; exit 1; }
if grep 'closed after' "$RUN/listener.out" | grep -v 'after 0 bytes'; then
    echo "hub_owner.sh: the other user's listener received bytes" >&2
    exit 1
fi
echo "nobody's listeners received nothing on 5 connections"
