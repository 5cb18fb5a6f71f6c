# Fuzzing (crates/fieldhub-fuzz): every decoder and parser of untrusted input.
#
#   make fuzz   build the libFuzzer targets (stable Rust: coverage
#               instrumentation through codegen flags, no cargo-fuzz) and run
#               each for FUZZ_SECONDS (default 30) from its committed corpus;
#               a crash fails and its input lands in target/fuzz/found/TARGET/.
#               Run by anyone who touches a decoder, before the change goes in.
#   make fuzz FUZZ_TARGET=wire FUZZ_SECONDS=600   one target, longer.
#
# Not part of `make test`, whose `cargo test` replays each corpus and 20,000
# mutations of it (crates/fieldhub-fuzz/tests/corpus.rs) in seconds, without
# the instrumented build. Inputs libFuzzer finds go to target/fuzz/found/,
# never into the committed corpus; add the good ones by hand.

FUZZ_DIR := $(CURDIR)/crates/fieldhub-fuzz
FUZZ_BUILD := $(or $(CARGO_TARGET_DIR),$(CURDIR)/target)/fuzz
# An explicit target triple keeps the instrumentation off build scripts and
# proc macros, which then build and run as usual.
FUZZ_TRIPLE := $(shell rustc -vV | sed -n 's/^host: //p')
FUZZ_BINS := $(FUZZ_BUILD)/$(FUZZ_TRIPLE)/release
FUZZ_TARGETS := $(basename $(notdir $(wildcard $(FUZZ_DIR)/fuzz/fuzz_targets/*.rs)))
FUZZ_SECONDS ?= 30
FUZZ_TARGET ?= $(FUZZ_TARGETS)
FUZZ_RUSTFLAGS := --cfg fuzzing -Cdebug-assertions -Coverflow-checks -Cpasses=sancov-module \
  -Cllvm-args=-sanitizer-coverage-level=4 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
  -Cllvm-args=-sanitizer-coverage-pc-table -Cllvm-args=-sanitizer-coverage-trace-compares
FOUND := $(CURDIR)/target/fuzz/found

.PHONY: fuzz fuzz-build
fuzz-build:
	$(call need,fuzz,c++)
	cd $(FUZZ_DIR)/fuzz && RUSTFLAGS="$(FUZZ_RUSTFLAGS)" CARGO_TARGET_DIR=$(FUZZ_BUILD) \
	  CARGO_PROFILE_RELEASE_OPT_LEVEL=1 $(CARGO) build --locked --release --target $(FUZZ_TRIPLE) --bins

# One run of target %: libFuzzer adds what it finds to $(FOUND)/% (first
# directory) and only reads the committed corpus (second). Not .PHONY, which
# make never matches against a pattern rule; no file of that name is made.
fuzz-run-%: fuzz-build
	mkdir -p $(FOUND)/$*/new
	$(FUZZ_BINS)/$* -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	  -artifact_prefix=$(FOUND)/$*/ $(FOUND)/$*/new $(FUZZ_DIR)/corpus/$* 2>$(FOUND)/$*/log \
	  || { tail -40 $(FOUND)/$*/log; echo "fuzz target $* failed; its input is in $(FOUND)/$*/"; exit 1; }
	@grep -h "stat::number_of_executed_units" $(FOUND)/$*/log | sed 's/^/$*: /'

fuzz: $(addprefix fuzz-run-,$(FUZZ_TARGET))
