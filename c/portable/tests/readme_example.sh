#!/bin/sh
# The C code of c/portable/README.md compiles as written (strict C99,
# warnings as errors), with declarations standing in for the firmware's own
# functions it calls (the UART FIFOs, the RTOS, the application).
#
#   readme_example.sh [CC]
set -eu
CC=${1:-cc}
HERE=$(cd "$(dirname "$0")" && pwd)
PORTABLE=$(dirname "$HERE")
RUN=$(mktemp -d "${TMPDIR:-/tmp}/fhp-readme.XXXXXX")
trap 'rm -rf "$RUN"' EXIT INT TERM
cat >"$RUN/example.c" <<'C'
#include "fieldhub_portable.h"
size_t my_uart_rx_fifo_take(void *uart, uint8_t *buf, size_t len);
size_t my_uart_tx_fifo_put(void *uart, const uint8_t *buf, size_t len);
extern int uart1;
void fail(const char *why);
void handle(const fhp_frame *frame, uint64_t seq, uint64_t timestamp_ns);
int have_something_to_send(fhp_frame *frame);
void rtos_sleep_until_uart_event(void);
void can_task(void);
C
awk '/^```c$/ { on = 1; next } /^```$/ { on = 0 } on' "$PORTABLE/README.md" >>"$RUN/example.c"
[ "$(grep -c 'fhp_poll' "$RUN/example.c")" -ge 1 ] || { echo "readme_example: no C example in README.md" >&2; exit 1; }
"$CC" -std=c99 -Wall -Wextra -Werror -pedantic -I"$PORTABLE" -c -o "$RUN/example.o" "$RUN/example.c"
echo "readme_example: the README's C code compiles"
