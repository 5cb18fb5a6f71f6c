# VM tests (tests/vm/): a QEMU guest (TCG, no KVM needed) on the bus.
#
#   make test-vm   build the fieldhub command (the test build every part
#                  uses: TEST_BIN) and run
#                  tests/vm/test-bridge.sh (guest SocketCAN <-> host hub
#                  through the bridge and virtio-serial),
#                  tests/vm/test-hubport.sh (a hub in the guest with vcan0 as
#                  its own SocketCAN port) and tests/vm/test-ivshmem.sh (guest
#                  clients <-> host hub through ivshmem regions, a guest killed
#                  mid-traffic) and tests/vm/test-federation.sh (a federated
#                  relay in the guest behind netem: 2 ms delay, 1 % loss)
#                  and tests/vm/test-portable.sh (the portable C client,
#                  static, over virtio-serial alone), about three minutes
#                  together. qemu-system-x86, busybox-static,
#                  cpio, xz-utils, iproute2 and the guests' kernel package come
#                  from `make deps`.

.PHONY: test-vm
test-vm:
	$(call need,test-vm,qemu-system-x86_64 busybox cpio xz tc gcc strip strings dpkg)
	@! ldd "$$(command -v busybox)" >/dev/null 2>&1 || \
	  { echo "test-vm: busybox is not the static one (busybox-static); run make deps"; exit 1; }
	$(WORKSPACE_BUILD)
	FIELDHUB_BIN=$(TEST_BIN) tests/vm/test-bridge.sh
	FIELDHUB_BIN=$(TEST_BIN) tests/vm/test-hubport.sh
	FIELDHUB_BIN=$(TEST_BIN) tests/vm/test-ivshmem.sh
	FIELDHUB_BIN=$(TEST_BIN) tests/vm/test-federation.sh
	FIELDHUB_BIN=$(TEST_BIN) tests/vm/test-portable.sh

TEST_PARTS += test-vm
