# What every VM test's host driver shares; sourced after it sets NAME (the
# test's name, for messages):
#   ROOT       the repository
#   VM         where the guest is built (target/vm)
#   FIELDHUB   the fieldhub command of the host and the guest: $FIELDHUB_BIN,
#              else target/release/fieldhub (`make build`); `make test-vm`
#              passes the build the other tests use
#   fail MSG   print "NAME: FAIL: MSG" and exit 1
#   need TOOL… exit naming `make deps` when a tool is missing
#   start_run  make the run directory $RUN (on /dev/shm where it can be, for
#              ivshmem regions), removed with every process in $pids at exit
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VM=${CARGO_TARGET_DIR:-$ROOT/target}/vm
FIELDHUB=${FIELDHUB_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/release/fieldhub}
export FIELDHUB_BIN="$FIELDHUB"
pids=""

fail() { echo "$NAME: FAIL: $*" >&2; exit 1; }

need() {
    for tool in "$@"; do
        command -v "$tool" >/dev/null || { echo "$NAME: $tool missing (make deps installs it)" >&2; exit 1; }
    done
}

cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$RUN"
}

start_run() {
    RUN=$(mktemp -d /dev/shm/fieldhub-vm.XXXXXX 2>/dev/null || mktemp -d "${TMPDIR:-/tmp}/fieldhub-vm.XXXXXX")
    trap cleanup EXIT INT TERM
}

# await WHAT COMMAND…: wait up to 120 s for COMMAND to succeed while the
# guest ($guest) runs; a guest that stopped early ends the wait with its
# console ($RUN/guest.log).
await() {
    what=$1
    shift
    for _ in $(seq 1200); do
        "$@" && return 0
        kill -0 "$guest" 2>/dev/null || { tail -20 "$RUN/guest.log"; fail "the guest ended before $what"; }
        sleep 0.1
    done
    fail "timed out waiting for $what"
}
