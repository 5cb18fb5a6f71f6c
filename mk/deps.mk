# The system packages the tests need, all installed here and nowhere else.
#
#   make deps   install with apt-get (Debian) every package below that is
#               missing, and download the VM guests' kernel package once
#               into target/vm/dl/; with everything there it changes nothing
#               and needs no root. `make test` runs it first.
#
# The parts' recipes only check that their tools are there and, when one is
# missing, name `make deps` (the `need` function of the Makefile).

# Who needs what:
#   make             this Makefile (.ci/run installs it before anything else)
#   gcc g++ libc6-dev binutils   C tests and examples (C89-C11, C++98 onwards),
#                    SIL Kit's test participants, libFuzzer (make fuzz), the
#                    VM guests' static test programs; readelf, strip, strings
#   cmake pkgconf    libfieldhub's build and its installed CMake and pkg-config files
#   python3 python3-venv   the venvs of the Python, docs, UI and SIL Kit parts
#   curl             the docs' HTTP examples
#   chromium         the web monitor's browser tests (Playwright drives it)
#   qemu-system-x86 busybox-static cpio xz-utils   the VM guests
#   iproute2         ip (the network-namespace tests, as root) and tc (netem in the VM guests)
#   strace           holds a recording's writes in the stuck-disk hostile-input test
#   gcc-mingw-w64-x86-64 wine64   the portable C client's and fieldhub.exe's Windows builds, run under
#                    Wine (mk/windows.mk); with the Rust target x86_64-pc-windows-gnu (rustup)
#   openssl          the TLS certificates of the docs' examples and the Windows tests
#   gcc-i686-linux-gnu libc6-dev-i386-cross   the portable C client's 32-bit build (its code size,
#                    c/portable/README.md), run with qemu-user; not gcc-multilib, which
#                    conflicts with the s390x cross compiler (apt would remove one for the other)
#   gcc-s390x-linux-gnu libc6-dev-s390x-cross qemu-user-static   its big-endian build, run with qemu-user
#   tmux             the terminal that drives fieldhub top's full-screen view (crates/fieldhub-cli/tests/cli/top_tui.rs)
DEPS_PACKAGES := make gcc g++ libc6-dev binutils cmake pkgconf python3 python3-venv curl chromium \
  qemu-system-x86 busybox-static cpio xz-utils iproute2 strace gcc-mingw-w64-x86-64 wine64 openssl gcc-i686-linux-gnu libc6-dev-i386-cross \
  gcc-s390x-linux-gnu libc6-dev-s390x-cross qemu-user-static tmux

# The guests' kernel: Debian 12's, a package apt-get downloads (not installs).
VM_DIR := $(or $(CARGO_TARGET_DIR),$(CURDIR)/target)/vm
VM_KERNEL_PATTERN := ^linux-image-6\.1\.0-[0-9]+-amd64$$

.PHONY: deps
deps:
	@command -v dpkg-query >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 || { \
	  echo "make deps: no apt-get here; install the equivalents of: $(DEPS_PACKAGES)"; \
	  echo "make deps: and put Debian 12's linux-image-6.1.0-*-amd64 .deb into $(VM_DIR)/dl/"; exit 1; }
	@rustup target list --installed 2>/dev/null | grep -qx x86_64-pc-windows-gnu || { \
	  echo "make deps: rustup target add x86_64-pc-windows-gnu"; \
	  rustup target add x86_64-pc-windows-gnu || { echo "make deps: rustup target add x86_64-pc-windows-gnu failed"; exit 1; }; }
	@missing=""; \
	for p in $(DEPS_PACKAGES); do \
	  dpkg-query -W -f='$${db:Status-Abbrev}' $$p 2>/dev/null | grep -q '^ii' || missing="$$missing $$p"; \
	done; \
	kernel=""; ls $(VM_DIR)/dl/linux-image-6.1.0-*-amd64_*.deb >/dev/null 2>&1 || kernel=yes; \
	[ -n "$$missing$$kernel" ] || exit 0; \
	if [ -n "$$missing" ] && [ "$$(id -u)" != 0 ]; then \
	  echo "make deps: missing$$missing; run make deps as root (or apt-get install them)"; exit 1; fi; \
	if [ -n "$$missing" ] || [ -z "$$(apt-cache search --names-only '$(VM_KERNEL_PATTERN)')" ]; then \
	  echo "make deps: apt-get update"; \
	  apt-get update -qq || { echo "make deps: apt-get update failed"; exit 1; }; fi; \
	if [ -n "$$missing" ]; then \
	  echo "make deps: installing$$missing"; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || \
	    { echo "make deps: apt-get install$$missing failed"; exit 1; }; fi; \
	if [ -n "$$kernel" ]; then \
	  pkg=$$(apt-cache search --names-only '$(VM_KERNEL_PATTERN)' | cut -d' ' -f1 | sort -V | tail -1); \
	  [ -n "$$pkg" ] || { echo "make deps: no linux-image-6.1.0-*-amd64 package in apt's lists"; exit 1; }; \
	  echo "make deps: downloading $$pkg (the VM guests' kernel) into $(VM_DIR)/dl"; \
	  mkdir -p $(VM_DIR)/dl && cd $(VM_DIR)/dl && out=$$(apt-get download $$pkg 2>&1) || \
	    { echo "$$out"; echo "make deps: apt-get download $$pkg failed"; exit 1; }; fi
