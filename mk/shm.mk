# The shared-memory transport (crates/fieldhub-shm).
#
#   make test-shm   model-check the ring and the doorbell protocol with loom.
#
# loom needs the whole crate graph built with `--cfg loom`, so it gets its own
# target directory and does not invalidate the normal build.

SHM_LOOM_TARGET := $(or $(CARGO_TARGET_DIR),$(CURDIR)/target)/loom

.PHONY: test-shm
test-shm:
	RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=$(SHM_LOOM_TARGET) \
	  $(CARGO) test --locked --release -p fieldhub-shm --test loom

TEST_PARTS += test-shm
