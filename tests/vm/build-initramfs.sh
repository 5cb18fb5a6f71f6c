#!/bin/sh
# Build the guest for the VM tests: Debian's kernel (the package `make deps`
# downloads into target/vm/dl/, unpacked once), an initramfs with busybox-static,
# the CAN, virtio-serial, virtio-net and netem modules with their dependencies,
# $FIELDHUB_BIN or target/release/fieldhub (stripped)
# and iproute2's tc with their shared libraries, the static test programs of guest/, the awk
# programs of seq/ (in /lib/fieldhub-vm) and every scenario directory of
# scenarios/.
#
# Usage: tests/vm/build-initramfs.sh     (prints nothing but progress)
# Output: target/vm/vmlinuz, target/vm/initramfs.cpio.gz
#
# Needs what `make deps` installs: dpkg, cpio, busybox-static, gcc, strings, iproute2.
set -eu

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VM=${CARGO_TARGET_DIR:-$ROOT/target}/vm
HERE=$ROOT/tests/vm
FIELDHUB=${FIELDHUB_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/release/fieldhub}
# Modules the guest loads, in load order after their dependencies.
MODULES="can can-raw vcan virtio_pci virtio_console virtio_net sch_netem"

mkdir -p "$VM/dl"

# --- kernel: the package `make deps` downloads, unpacked once ------------
if [ ! -f "$VM/vmlinuz" ] || [ ! -d "$VM/kernel/lib/modules" ]; then
    deb=$(ls "$VM"/dl/linux-image-6.1.0-*-amd64_*.deb 2>/dev/null | sort -V | tail -1)
    [ -n "$deb" ] || { echo "build-initramfs: no kernel package in $VM/dl; run make deps" >&2; exit 1; }
    rm -rf "$VM/kernel"
    dpkg -x "$deb" "$VM/kernel"
    cp "$VM"/kernel/boot/vmlinuz-* "$VM/vmlinuz"
fi
MODDIR=$(ls -d "$VM"/kernel/lib/modules/* | head -1)

# --- initramfs tree --------------------------------------------------------
[ -x "$FIELDHUB" ] || { echo "build-initramfs: $FIELDHUB missing; run make build" >&2; exit 1; }
BUSYBOX=$(command -v busybox || true)
[ -n "$BUSYBOX" ] && ldd "$BUSYBOX" 2>&1 | grep -q 'not a dynamic' \
    || { echo "build-initramfs: needs a static busybox (busybox-static): run make deps" >&2; exit 1; }

TREE=$VM/initramfs
rm -rf "$TREE"
mkdir -p "$TREE/bin" "$TREE/sbin" "$TREE/proc" "$TREE/sys" "$TREE/dev" "$TREE/tmp" "$TREE/lib/modules" "$TREE/scenarios"
cp "$BUSYBOX" "$TREE/bin/busybox"
for applet in $("$BUSYBOX" --list); do
    [ "$applet" = busybox ] || ln -sf busybox "$TREE/bin/$applet"
done

# Modules, dependencies first, decompressed (busybox insmod takes plain .ko).
loaded=""
add_module() {
    case " $loaded " in *" $1 "*) return ;; esac
    file=$(find "$MODDIR" -name "$1.ko" -o -name "$1.ko.xz" | head -1)
    [ -n "$file" ] || { echo "build-initramfs: module $1 not in $MODDIR" >&2; exit 1; }
    case $file in
        *.xz) xz -dc "$file" >"$TREE/lib/modules/$1.ko" ;;
        *) cp "$file" "$TREE/lib/modules/$1.ko" ;;
    esac
    for dep in $(strings "$TREE/lib/modules/$1.ko" | sed -n 's/^depends=//p' | tr ',' ' '); do
        add_module "$dep"
    done
    loaded="$loaded $1"
    echo "$1" >>"$TREE/lib/modules/order"
}
for m in $MODULES; do add_module "$m"; done

# fieldhub and the shared libraries it links.
strip -s -o "$TREE/bin/fieldhub" "$FIELDHUB" 2>/dev/null || cp "$FIELDHUB" "$TREE/bin/fieldhub"
for lib in $(ldd "$FIELDHUB" | grep -o '/[^ ]*'); do
    mkdir -p "$TREE$(dirname "$lib")"
    cp -L "$lib" "$TREE$lib"
done

# iproute2's tc, for netem (busybox's tc has no netem), with its libraries.
TC=$(command -v tc || true)
[ -n "$TC" ] && ! ldd "$TC" 2>&1 | grep -q 'not a dynamic' || { echo "build-initramfs: needs iproute2's tc: run make deps" >&2; exit 1; }
cp "$TC" "$TREE/sbin/tc"
for lib in $(ldd "$TC" | grep -o '/[^ ]*'); do
    mkdir -p "$TREE$(dirname "$lib")"
    cp -L "$lib" "$TREE$lib"
done

# Static guest test programs.
for src in "$HERE"/guest/*.c; do
    gcc -static -O2 -Wall -Wextra -Werror -o "$TREE/bin/$(basename "$src" .c)" "$src"
done
# The portable C client's frame exchanger, as firmware would link it (c/portable).
PORTABLE="$HERE/../../c/portable"
gcc -static -O2 -std=c99 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -I"$PORTABLE" -o "$TREE/bin/fhp_seq" \
    "$PORTABLE/tests/fhp_seq.c" "$PORTABLE/fieldhub_portable.c" "$PORTABLE/fieldhub_portable_io.c"

cp -r "$HERE"/scenarios/* "$TREE/scenarios/"
mkdir -p "$TREE/lib/fieldhub-vm"
cp "$HERE"/seq/*.awk "$TREE/lib/fieldhub-vm/"
cp "$HERE/guest/init" "$TREE/init"
chmod +x "$TREE/init" "$TREE"/scenarios/*/run

(cd "$TREE" && find . | cpio -o -H newc --quiet | gzip -1) >"$VM/initramfs.cpio.gz"
echo "build-initramfs: $VM/initramfs.cpio.gz ($(du -h "$VM/initramfs.cpio.gz" | cut -f1))"
