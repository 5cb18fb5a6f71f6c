# fieldhub — one entry point for building, running and testing.
#
#   make run      start the hub with its built-in default configuration
#   make test     run every test: Rust, then each part registered in mk/*.mk
#
# Each language or subsystem adds its own `mk/<part>.mk`, which defines a
# `test-<part>` target and appends it to TEST_PARTS.

CARGO ?= cargo
TEST_PARTS :=
# What the non-Rust parts run to get the fieldhub command and the test
# binaries: the very build `test-rust` made (same packages, same features),
# so it costs nothing after it, where `cargo build -p fieldhub-cli` would
# resolve features anew and compile the hub and Zenoh a second time.
WORKSPACE_BUILD = $(CARGO) test --locked --workspace --no-run

-include mk/*.mk

.PHONY: run test test-rust build install lint clean

run:
	$(CARGO) run --release --locked -p fieldhub-cli --bin fieldhub -- hub

build:
	$(CARGO) build --release --locked --workspace

install:
	$(CARGO) install --locked --profile dist --path crates/fieldhub-cli --target-dir $(or $(CARGO_TARGET_DIR),$(CURDIR)/target)

test: test-rust $(TEST_PARTS)

test-rust:
	$(CARGO) test --locked --workspace

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --locked --workspace --all-targets -- -D warnings
	# the fuzz workspace has its own lock file; a new workspace dependency must reach it too
	cd crates/fieldhub-fuzz/fuzz && $(CARGO) metadata --locked --format-version 1 >/dev/null

clean:
	$(CARGO) clean
