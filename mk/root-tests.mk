# Tests that need root, which `make test` runs as root and skips otherwise:
#
# - the federation tests of hubs in three network namespaces joined by veth
#   pairs (crates/fieldhub-cli/tests/federation_netns.rs), which also need
#   iproute2's `ip`;
# - the tests of other local users (crates/fieldhub-cli/tests/local_users.rs),
#   which become `nobody` to knock on the hub's door.
#
# Run as root, `make test` installs iproute2 when it is missing and sets
# FIELDHUB_NETNS_REQUIRED=1 and FIELDHUB_OTHER_USER_REQUIRED=1, so those
# tests fail rather than skip; as another user they skip with a message.

AS_ROOT := $(shell [ "$$(id -u)" = 0 ] && echo 1 || echo 0)

.PHONY: netns-tools
netns-tools:
	@if [ "$(AS_ROOT)" = 1 ] && ! command -v ip >/dev/null 2>&1; then \
	  echo "test-rust: installing iproute2 (Debian), whose ip the network-namespace tests use"; \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 >/dev/null; } || \
	  { echo "test-rust: cannot install iproute2; install it or run as a user without root to skip those tests"; exit 1; }; \
	fi

test-rust: netns-tools
test-rust: export FIELDHUB_NETNS_REQUIRED := $(AS_ROOT)
test-rust: export FIELDHUB_OTHER_USER_REQUIRED := $(AS_ROOT)
