#!/bin/sh
# The soak run of docs/security.md: numbered traffic through many shared-memory
# and TCP clients while some are killed (SIGKILL) at random moments and
# replaced; afterwards every receiver must have seen one gap-free order and the
# hub's descriptors and threads must be back. Exits 1 if anything was wrong.
#
# Defaults: 10 million numbered frames, 64 clients, 1,000 kills (about ten
# minutes on two cores). Arguments go to `fieldhub bench soak`, e.g.
#   bench/soak.sh --frames 200000 --clients 32 --kills 100
set -eu
FIELDHUB=${FIELDHUB:-target/release/fieldhub}
echo "load before: $(cat /proc/loadavg)" >&2
"$FIELDHUB" bench soak "$@"
echo "load after: $(cat /proc/loadavg)" >&2
