# fieldhub — one entry point for building, running and testing.
#
#   make run      start the hub with its built-in default configuration
#   make test     run every test (Rust; C and Python join as they land)

CARGO ?= cargo

.PHONY: run test build install lint clean

run:
	$(CARGO) run --release --locked -p fieldhub-cli --bin fieldhub -- hub

build:
	$(CARGO) build --release --locked --workspace

install:
	$(CARGO) install --locked --path crates/fieldhub-cli

test:
	$(CARGO) test --locked --workspace

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --locked --workspace --all-targets -- -D warnings

clean:
	$(CARGO) clean
