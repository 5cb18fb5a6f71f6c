# libfieldhub, the C library (crates/fieldhub-ffi, include/, c/, examples/c/).
#
#   make test-c   check the header is up to date and compiles as C89, C99,
#                 C11 and C++98 onwards, build the hub, build and
#                 install libfieldhub into a scratch prefix, build the C
#                 tests and examples against that installation, run them;
#                 then build and run the portable C99 client's tests
#                 (c/portable: spec vectors, hostile hub input, a real hub).

C_TARGET_DIR := $(or $(CARGO_TARGET_DIR),$(CURDIR)/target)
C_BUILD := $(C_TARGET_DIR)/c-build
C_PREFIX := $(C_BUILD)/prefix

.PHONY: test-c
test-c:
	$(CARGO) test --locked --workspace --release --test header --test header_standards
	$(call need,test-c,cc c++ cmake pkg-config readelf)
	$(WORKSPACE_BUILD)
	rm -rf $(C_BUILD)
	cmake -S c -B $(C_BUILD)/lib -DCMAKE_INSTALL_PREFIX=$(C_PREFIX) -DFIELDHUB_TEST_HOOKS=ON \
	  -DFIELDHUB_CARGO_PROFILE=release -DFIELDHUB_CARGO_TARGET_DIR=$(TEST_TARGET_DIR)
	cmake --build $(C_BUILD)/lib
	cmake --install $(C_BUILD)/lib
	readelf -d $(C_PREFIX)/lib/libfieldhub.so | grep -q 'SONAME.*\[libfieldhub\.so\.0\]' || \
	  { echo "test-c: libfieldhub.so lacks the soname libfieldhub.so.0"; exit 1; }
	cmake -S c/tests -B $(C_BUILD)/tests -DCMAKE_PREFIX_PATH=$(C_PREFIX) \
	  -DFIELDHUB_BIN=$(TEST_BIN)
	cmake --build $(C_BUILD)/tests
	cd $(C_BUILD)/tests && ctest --output-on-failure
	cmake -S c/portable -B $(C_BUILD)/portable -DFIELDHUB_BIN=$(TEST_BIN)
	cmake --build $(C_BUILD)/portable
	cd $(C_BUILD)/portable && ctest --output-on-failure

TEST_PARTS += test-c
