# fieldhub on Windows (docs/windows.md): the CLI (fieldhub.exe) and the C
# library (fieldhub.dll) built for x86_64-pc-windows-gnu, run under Wine
# against Linux hubs.
#
#   make test-windows   build fieldhub.exe and fieldhub.dll and run
#                       tests/windows/wine_cli.sh: 10,000 numbered frames
#                       each way between fieldhub.exe (gen, send, dump) and
#                       Linux clients, wiring driven by fieldhub.exe ctl, and
#                       10,000 each way from a C program linked against
#                       fieldhub.dll; over TCP and over TLS. Then
#                       tests/windows/wine_hub.sh: fieldhub.exe hub under
#                       Wine serves a Linux and a Windows client at once
#                       (10,000 numbered frames each way) and its control API.
#
# The Windows build is a second compile of the CLI (with the hub and Zenoh)
# and the C library; both scripts use the one build.

WINDOWS_TARGET := x86_64-pc-windows-gnu
WINDOWS_OUT := $(TEST_TARGET_DIR)/$(WINDOWS_TARGET)/debug

.PHONY: test-windows
test-windows:
	$(call need,test-windows,x86_64-w64-mingw32-gcc openssl curl rustup)
	@rustup target list --installed | grep -qx $(WINDOWS_TARGET) || \
	  { echo "test-windows: the Rust target $(WINDOWS_TARGET) is missing; run make deps (rustup target add $(WINDOWS_TARGET))"; exit 1; }
	$(WORKSPACE_BUILD)
	$(CARGO) build --locked --target $(WINDOWS_TARGET) -p fieldhub-cli -p fieldhub-ffi
	sh tests/windows/wine_cli.sh $(TEST_BIN) $(WINDOWS_OUT) 10000
	sh tests/windows/wine_hub.sh $(TEST_BIN) $(WINDOWS_OUT) 10000

TEST_PARTS += test-windows
