# Vector SIL Kit interop (crates/fieldhub-silkit, the hub's transport/silkit.rs, docs/silkit.md).
#
#   make test-silkit   fetch SIL Kit 5.0.3 once (libSilKit.so and sil-kit-registry, from the
#                      silkit-py 1.0.5 wheel on the Python package index) into target/silkit/,
#                      build the test participants (tests/silkit/) against it, and run the SIL
#                      Kit system tests (fieldhub-systest's test `silkit`, feature silkit-peers)
#                      for real: the real registry, real participants, a real hub. The
#                      fieldhub-silkit crate's own tests run in test-rust.
#
# `--workspace --features fieldhub-systest/silkit-peers --test silkit` is
# `-p fieldhub-systest --features silkit-peers --test silkit` with the
# workspace's feature resolution: the build of test-rust, so only the silkit
# test and the systest binary compile here (resolved for fieldhub-systest
# alone, some sixty crates, the hub among them, would compile again).
#
# The Rust tests find SIL Kit through FIELDHUB_SILKIT_LIB, FIELDHUB_SILKIT_REGISTRY and
# FIELDHUB_SILKIT_PEER (FIELDHUB_SILKIT_SYNC_PEER for synchronised time, FIELDHUB_SILKIT_NETSIM_PEER
# for the simulator mode); plain `cargo test`
# without them skips them and says so. Here FIELDHUB_SILKIT_REQUIRED=1 turns a missing one
# into a failure.

SILKIT_DIR := $(or $(CARGO_TARGET_DIR),$(CURDIR)/target)/silkit
SILKIT_LIBDIR := $(SILKIT_DIR)/wheel/SilKit_py
SILKIT_LIB := $(SILKIT_LIBDIR)/libSilKit.so
SILKIT_REGISTRY := $(SILKIT_LIBDIR)/bin/sil-kit-registry
SILKIT_PEER := $(SILKIT_DIR)/silkit_peer
SILKIT_SYNC_PEER := $(SILKIT_DIR)/silkit_sync_peer
SILKIT_NETSIM_PEER := $(SILKIT_DIR)/silkit_netsim_peer
SILKIT_WHEEL := silkit-py==1.0.5

# pip from the project's venv (mk/python.mk): a fresh machine's Python may have none.
$(SILKIT_LIB): $(VENV_PIP)
	mkdir -p $(SILKIT_DIR)
	ls $(SILKIT_DIR)/silkit_py-*.whl >/dev/null 2>&1 || \
	  $(VENV_PIP) download -q --no-deps --only-binary=:all: --python-version 3.12 \
	    --platform manylinux_2_28_x86_64 $(SILKIT_WHEEL) -d $(SILKIT_DIR)
	rm -rf $(SILKIT_DIR)/wheel
	$(PYTHON) -m zipfile -e $(SILKIT_DIR)/silkit_py-*.whl $(SILKIT_DIR)/wheel
	chmod +x $(SILKIT_LIBDIR)/bin/*
	touch $@

$(SILKIT_PEER): tests/silkit/silkit_peer.c tests/silkit/silkit_capi.h $(SILKIT_LIB)
	$(CC) -O2 -Wall -Wextra -Werror -pthread -o $@ $< -L$(SILKIT_LIBDIR) -lSilKit -Wl,-rpath,$(SILKIT_LIBDIR)

$(SILKIT_SYNC_PEER): tests/silkit/silkit_sync_peer.c tests/silkit/silkit_capi.h $(SILKIT_LIB)
	$(CC) -O2 -Wall -Wextra -Werror -pthread -o $@ $< -L$(SILKIT_LIBDIR) -lSilKit -Wl,-rpath,$(SILKIT_LIBDIR)

$(SILKIT_NETSIM_PEER): tests/silkit/silkit_netsim_peer.c tests/silkit/silkit_capi.h $(SILKIT_LIB)
	$(CC) -O2 -Wall -Wextra -Werror -pthread -o $@ $< -L$(SILKIT_LIBDIR) -lSilKit -Wl,-rpath,$(SILKIT_LIBDIR)

.PHONY: test-silkit
test-silkit: $(SILKIT_LIB) $(SILKIT_PEER) $(SILKIT_SYNC_PEER) $(SILKIT_NETSIM_PEER)
	test -x $(SILKIT_REGISTRY) || { echo "test-silkit: $(SILKIT_REGISTRY) is missing; remove $(SILKIT_DIR) and run again"; exit 1; }
	FIELDHUB_SILKIT_LIB=$(SILKIT_LIB) FIELDHUB_SILKIT_REGISTRY=$(SILKIT_REGISTRY) \
	FIELDHUB_SILKIT_PEER=$(SILKIT_PEER) FIELDHUB_SILKIT_SYNC_PEER=$(SILKIT_SYNC_PEER) \
	FIELDHUB_SILKIT_NETSIM_PEER=$(SILKIT_NETSIM_PEER) FIELDHUB_SILKIT_REQUIRED=1 \
	  $(CARGO) test --locked --workspace --release --features fieldhub-systest/silkit-peers --test silkit

TEST_PARTS += test-silkit

# The docs' configurations with [[silkit]] are checked as a start would
# check them (`fieldhub hub --check-config` loads SIL Kit's library), so the
# docs tests find the library where the SIL Kit tests do.
test-docs: $(SILKIT_LIB)
test-docs: export FIELDHUB_SILKIT_LIB := $(SILKIT_LIB)
