# fieldhub on Windows (docs/windows.md): the CLI built for
# x86_64-pc-windows-gnu, run under Wine against Linux hubs.
#
#   make test-windows   build fieldhub.exe and run tests/windows/wine_cli.sh:
#                       10,000 numbered frames each way between fieldhub.exe
#                       (gen, send, dump) and Linux clients, and wiring
#                       driven by fieldhub.exe ctl, over TCP and over TLS.
#
# The Windows build is a second compile of the client crates (not of the
# hub or Zenoh, which are Linux-only dependencies of the CLI).

WINDOWS_TARGET := x86_64-pc-windows-gnu
WINDOWS_EXE := $(TARGET_DIR)/$(WINDOWS_TARGET)/debug/fieldhub.exe

.PHONY: test-windows
test-windows:
	$(call need,test-windows,x86_64-w64-mingw32-gcc openssl rustup)
	@rustup target list --installed | grep -qx $(WINDOWS_TARGET) || \
	  { echo "test-windows: the Rust target $(WINDOWS_TARGET) is missing; run make deps (rustup target add $(WINDOWS_TARGET))"; exit 1; }
	$(WORKSPACE_BUILD)
	$(CARGO) build --locked --target $(WINDOWS_TARGET) -p fieldhub-cli
	sh tests/windows/wine_cli.sh $(TARGET_DIR)/debug/fieldhub $(WINDOWS_EXE) 10000

TEST_PARTS += test-windows
