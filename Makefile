# fieldhub — one entry point for building, running and testing.
#
#   make run      start the hub with its built-in default configuration
#   make test     run every test: `make deps`, Rust, then each part registered
#                 in mk/*.mk; prints each part's time and its own at the end
#   make deps     install the system packages the tests need (mk/deps.mk)
#   make lint     rustfmt, clippy and rustdoc, warnings as errors
#   make fuzz     libFuzzer on every decoder (mk/fuzz.mk); not part of `make test`
#
# Each language or subsystem adds its own `mk/<part>.mk`, which defines a
# `test-<part>` target and appends it to TEST_PARTS.
#
# `make test` builds the workspace once and every part tests that build:
# `cargo test --release`, with the release profile turned into a test build
# (opt-level 1, debug assertions and overflow checks on) in its own
# target directory, target/test (TEST_TARGET_DIR). Every cargo build a part
# makes — the test binaries, the fieldhub command, the wheel's maturin build,
# the C library's cmake build, the docs' `make install`, `pip install ./python`
# and `cmake -S c` — then resolves to the same profile and directory and
# compiles only what differs (features), where a debug build for the tests and
# a release build for the rest compiled the workspace twice. The release
# build proper (target/release: `make run`, `make build`, `make install`, the
# benchmarks) is untouched by it.
#
#   make build    the release build of the fieldhub command (target/release/fieldhub)
#   make install  that build, stripped, into ~/.cargo/bin

CARGO ?= cargo
PYTHON ?= python3
TEST_PARTS :=
TARGET_DIR := $(or $(CARGO_TARGET_DIR),$(CURDIR)/target)
# A CARGO_TARGET_DIR set by hand is where cargo builds, tests too.
TEST_TARGET_DIR := $(or $(CARGO_TARGET_DIR),$(CURDIR)/target/test)
TEST_BIN := $(TEST_TARGET_DIR)/release/fieldhub
# Every test part, run alone or by `make test`, with that build. The
# directory goes in CARGO_BUILD_TARGET_DIR, not CARGO_TARGET_DIR, from which
# the parts name their own directories (target/vm, target/silkit, …).
test test-%: export CARGO_BUILD_TARGET_DIR = $(TEST_TARGET_DIR)
test test-%: export CARGO_PROFILE_RELEASE_OPT_LEVEL = 1
test test-%: export CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS = true
test test-%: export CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS = true
# No line tables (the release profile's are for perf): a failing test names
# its file and line without them; the hub's crate compiles in 5 % less CPU
# time (118 s against 124 s at opt-level 1); and the docs' Rust program, a
# crate of its own whose release profile has none, shares this build (with
# line tables here, cargo compiled its 101 dependencies again).
test test-%: export CARGO_PROFILE_RELEASE_DEBUG = false
# What the non-Rust parts run to get the fieldhub command and the test
# binaries: the very build `test-rust` made (same packages, same features),
# so it costs nothing after it, where `cargo build -p fieldhub-cli` would
# resolve features anew and compile the hub and Zenoh a second time.
WORKSPACE_BUILD = $(CARGO) test --locked --workspace --release --no-run
# The release build: the fieldhub command, with features resolved for it
# and the Python extension together (`-p fieldhub-py`, which adds pyo3 and
# nothing else to build here), as the wheel's maturin build resolves them
# (mk/python.mk): the two then share every compiled dependency. `make run`,
# `make build`, `make install` and the benchmarks use this build.
RELEASE_BUILD = $(CARGO) build --release --locked -p fieldhub-cli -p fieldhub-py --bin fieldhub
# Where cargo put it: under a test part (the docs' `make install`) the test
# build's directory.
RELEASE_BIN = $(or $(CARGO_TARGET_DIR),$(CARGO_BUILD_TARGET_DIR),$(CURDIR)/target)/release/fieldhub

# $(call need,PART,COMMAND…): fail naming `make deps` when a command is missing.
need = @for c in $(2); do command -v $$c >/dev/null 2>&1 || \
  { echo "$(1): $$c is missing; run make deps (as root), which installs what the tests need"; exit 1; }; done

-include mk/*.mk

.PHONY: run test test-parts test-rust build install lint clean

run:
	$(RELEASE_BUILD)
	$(RELEASE_BIN) hub

build:
	$(RELEASE_BUILD)

# The release build, installed where `cargo install` would put it, without
# the line tables the release profile keeps for profiling (a third of the size).
INSTALL_BIN_DIR := $${CARGO_INSTALL_ROOT:-$${CARGO_HOME:-$$HOME/.cargo}}/bin
install:
	$(RELEASE_BUILD)
	mkdir -p "$(INSTALL_BIN_DIR)"
	install -m 755 -s $(RELEASE_BIN) "$(INSTALL_BIN_DIR)/fieldhub"

# `make test` times itself: each part's line is the time since the one before
# (its own prerequisites included), the last the whole run's.
TEST_TIMES := $(TARGET_DIR)/test-times
test:
	@mkdir -p $(TARGET_DIR) && echo "start $$(date +%s)" >$(TEST_TIMES)
	@$(MAKE) --no-print-directory test-parts; status=$$?; \
	  now=$$(date +%s); echo; \
	  awk -v now=$$now -v status=$$status ' \
	    NR == 1 { start = prev = $$2; next } \
	    { printf "  %-12s %3d min %2d s\n", $$1, ($$2 - prev) / 60, ($$2 - prev) % 60; prev = $$2 } \
	    END { t = now - start; printf "make test: %d min %d s%s\n", t / 60, t % 60, status ? " (FAILED)" : "" }' \
	    $(TEST_TIMES); \
	  exit $$status

test-parts: deps timed-deps $(foreach part,test-rust $(TEST_PARTS),$(part) timed-$(part))

# Not .PHONY, which make never matches against a pattern rule; no file of
# that name is made.
timed-%: %
	@echo "$* $$(date +%s)" >>$(TEST_TIMES)

test-rust:
	$(CARGO) test --locked --workspace --release

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --locked --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --locked --no-deps --workspace
	# the fuzz workspace has its own lock file; a new workspace dependency must reach it too
	cd crates/fieldhub-fuzz/fuzz && $(CARGO) metadata --locked --format-version 1 >/dev/null
	# the workspace-hack (crates/workspace-hack) names every dependency with the workspace's features
	@command -v cargo-hakari >/dev/null 2>&1 || { echo "lint: cargo-hakari is missing: cargo install cargo-hakari --locked"; exit 1; }
	$(CARGO) hakari generate --diff
	$(CARGO) hakari manage-deps --dry-run

clean:
	$(CARGO) clean
