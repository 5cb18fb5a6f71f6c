#!/bin/sh
# The portable C client built for a 32-bit target (i686, where size_t and
# long are 32 bits) decodes and encodes every spec vector byte for byte,
# and its code size is printed (c/portable/README.md reports it).
#
#   build_32bit.sh SPEC_VECTORS_DIR
#
# Needs i686-linux-gnu-gcc (gcc-i686-linux-gnu, libc6-dev-i386-cross) and
# qemu-i386-static (qemu-user-static): make deps installs them. Debian's
# cross compiler, not gcc-multilib: multilib conflicts with the s390x cross
# compiler of the big-endian build, and apt would remove one for the other.
set -eu
VECTORS=$1
HERE=$(cd "$(dirname "$0")" && pwd)
PORTABLE=$(dirname "$HERE")
command -v i686-linux-gnu-gcc >/dev/null ||
    { echo "build_32bit: i686-linux-gnu-gcc missing (gcc-i686-linux-gnu: make deps installs it)" >&2; exit 1; }
QEMU=$(command -v qemu-i386-static || command -v qemu-i386) ||
    { echo "build_32bit: qemu-i386-static missing (qemu-user-static: make deps installs it)" >&2; exit 1; }
RUN=$(mktemp -d "${TMPDIR:-/tmp}/fhp-32.XXXXXX")
trap 'rm -rf "$RUN"' EXIT INT TERM
i686-linux-gnu-gcc -static -std=c99 -O2 -Wall -Wextra -Werror -pedantic -Wconversion -I"$PORTABLE" \
    -o "$RUN/vector_tool" "$HERE/vector_tool.c" "$PORTABLE/fieldhub_portable.c"
python3 "$HERE/check_vectors.py" "$VECTORS" "$QEMU" "$RUN/vector_tool"
i686-linux-gnu-gcc -std=c99 -Os -c -o "$RUN/client.o" "$PORTABLE/fieldhub_portable.c"
echo "fieldhub_portable.c, i686-linux-gnu-gcc -Os: $(size "$RUN/client.o" | awk 'NR == 2 { print $1 }') bytes of text"
