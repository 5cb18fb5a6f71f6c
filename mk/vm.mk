# VM tests (tests/vm/): a QEMU guest (TCG, no KVM needed) on the bus.
#
#   make test-vm   install qemu-system-x86, busybox-static, cpio, xz-utils and iproute2
#                  with apt-get when missing, build the release binary, and
#                  run tests/vm/test-bridge.sh (guest SocketCAN <-> host hub
#                  through the bridge and virtio-serial),
#                  tests/vm/test-hubport.sh (a hub in the guest with vcan0 as
#                  its own SocketCAN port) and tests/vm/test-ivshmem.sh (guest
#                  clients <-> host hub through ivshmem regions, a guest killed
#                  mid-traffic) and tests/vm/test-federation.sh (a federated
#                  relay in the guest behind netem: 2 ms delay, 1 % loss),
#                  about two minutes together.

.PHONY: test-vm
test-vm:
	@missing=""; \
	command -v qemu-system-x86_64 >/dev/null 2>&1 || missing="$$missing qemu-system-x86"; \
	{ command -v busybox >/dev/null 2>&1 && ! ldd "$$(command -v busybox)" >/dev/null 2>&1; } || missing="$$missing busybox-static"; \
	command -v cpio >/dev/null 2>&1 || missing="$$missing cpio"; \
	command -v xz >/dev/null 2>&1 || missing="$$missing xz-utils"; \
	command -v tc >/dev/null 2>&1 || missing="$$missing iproute2"; \
	if [ -n "$$missing" ]; then \
	  echo "test-vm: installing$$missing"; \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; } || \
	  { echo "test-vm: cannot install$$missing; install them to run the VM tests"; exit 1; }; \
	fi
	$(CARGO) build --profile dist --locked -p fieldhub-cli
	tests/vm/test-bridge.sh
	tests/vm/test-hubport.sh
	tests/vm/test-ivshmem.sh
	tests/vm/test-federation.sh

TEST_PARTS += test-vm
