# Tests that need root, which `make test` runs as root and skips otherwise:
#
# - the federation tests of hubs in three network namespaces joined by veth
#   pairs (crates/fieldhub-systest/tests/system/federation/netns.rs), which
#   also need iproute2's `ip`;
# - the tests of other local users
#   (crates/fieldhub-systest/tests/system/access/local_users.rs), which become
#   `nobody` to knock on the hub's door.
#
# Run as root, `make test` sets FIELDHUB_NETNS_REQUIRED=1 and
# FIELDHUB_OTHER_USER_REQUIRED=1, so those tests fail rather than skip (and
# checks for `ip`, which `make deps` installs); as another user they skip
# with a message.

AS_ROOT := $(shell [ "$$(id -u)" = 0 ] && echo 1 || echo 0)

.PHONY: netns-tools
netns-tools:
	@if [ "$(AS_ROOT)" = 1 ] && ! command -v ip >/dev/null 2>&1; then \
	  echo "test-rust: ip (iproute2), which the network-namespace tests use as root, is missing; run make deps"; \
	  exit 1; \
	fi

test-rust: netns-tools
test-rust: export FIELDHUB_NETNS_REQUIRED := $(AS_ROOT)
test-rust: export FIELDHUB_OTHER_USER_REQUIRED := $(AS_ROOT)
