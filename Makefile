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
# Two builds of the workspace serve every part: the debug build of
# `cargo test --workspace` and the release build (RELEASE_BUILD), which the
# wheel, the VM guests, `make run`, `make install` and the benchmarks share.
#
#   make build    the release build of the fieldhub command (target/release/fieldhub)
#   make install  that build, stripped, into ~/.cargo/bin

CARGO ?= cargo
PYTHON ?= python3
TEST_PARTS :=
TARGET_DIR := $(or $(CARGO_TARGET_DIR),$(CURDIR)/target)
# What the non-Rust parts run to get the fieldhub command and the test
# binaries: the very build `test-rust` made (same packages, same features),
# so it costs nothing after it, where `cargo build -p fieldhub-cli` would
# resolve features anew and compile the hub and Zenoh a second time.
WORKSPACE_BUILD = $(CARGO) test --locked --workspace --no-run
# The release build: the fieldhub command, with features resolved for it
# and the Python extension together (`-p fieldhub-py`, which adds pyo3 and
# nothing else to build here), as the wheel's maturin build resolves them
# (mk/python.mk): the two then share every compiled dependency. Resolved for
# fieldhub-cli alone, the build-time half differs (pyo3's build script asks
# more of a crate Zenoh's macros use) and Zenoh, the hub and the CLI compile
# twice. `make run`, `make build`, `make install`, the VM guests and the
# benchmarks use this build.
RELEASE_BUILD = $(CARGO) build --release --locked -p fieldhub-cli -p fieldhub-py --bin fieldhub
RELEASE_BIN = $(TARGET_DIR)/release/fieldhub

# In `make test` the release build starts in the background once `make deps`
# is done, at idle priority (chrt --idle): it gets only the CPU time the
# debug build and the tests leave, which is plenty while tests wait on
# sockets and timers, and takes none from them. Its users (the wheel, the VM
# tests) first wait for it (release-wait), at normal priority from then on
# (on a machine busy with other work an idle build would hardly move), then
# build whatever is left in the foreground, where errors show.
RELEASE_BG := $(TARGET_DIR)/release-background
.PHONY: release-start release-wait
release-start:
	@mkdir -p $(TARGET_DIR); \
	if command -v chrt >/dev/null 2>&1; then idle="chrt --idle 0"; else idle="nice -n 19"; fi; \
	$$idle $(RELEASE_BUILD) >$(RELEASE_BG).log 2>&1 & echo $$! >$(RELEASE_BG).pid
release-wait:
	@if [ -f $(RELEASE_BG).pid ]; then \
	  pid=$$(cat $(RELEASE_BG).pid); rm -f $(RELEASE_BG).pid; \
	  for p in $$pid $$(pgrep -P $$pid); do chrt -a -o -p 0 $$p || renice -n 0 -p $$p; done >/dev/null 2>&1; \
	  while kill -0 $$pid 2>/dev/null; do sleep 1; done; fi

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
	@stop_release() { [ ! -f $(RELEASE_BG).pid ] || kill $$(cat $(RELEASE_BG).pid) 2>/dev/null; rm -f $(RELEASE_BG).pid; }; \
	  trap 'stop_release; exit 130' INT TERM; \
	  $(MAKE) --no-print-directory test-parts; status=$$?; stop_release; \
	  now=$$(date +%s); echo; \
	  awk -v now=$$now -v status=$$status ' \
	    NR == 1 { start = prev = $$2; next } \
	    { printf "  %-12s %3d min %2d s\n", $$1, ($$2 - prev) / 60, ($$2 - prev) % 60; prev = $$2 } \
	    END { t = now - start; printf "make test: %d min %d s%s\n", t / 60, t % 60, status ? " (FAILED)" : "" }' \
	    $(TEST_TIMES); \
	  exit $$status

test-parts: deps timed-deps release-start $(foreach part,test-rust $(TEST_PARTS),$(part) timed-$(part))

# Not .PHONY, which make never matches against a pattern rule; no file of
# that name is made.
timed-%: %
	@echo "$* $$(date +%s)" >>$(TEST_TIMES)

test-rust:
	$(CARGO) test --locked --workspace

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --locked --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --locked --no-deps --workspace
	# the fuzz workspace has its own lock file; a new workspace dependency must reach it too
	cd crates/fieldhub-fuzz/fuzz && $(CARGO) metadata --locked --format-version 1 >/dev/null

clean:
	$(CARGO) clean
