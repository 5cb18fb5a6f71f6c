# The Python package (python/): python-can interface, hub control, pytest plugin.
#
#   make wheel         build the package's wheel (abi3: one wheel for CPython
#                      >= 3.9; manylinux) into target/wheels/
#   make test-python   build the wheel, install it into a fresh venv with the
#                      test tools, and run the Python tests there: what a
#                      user who runs `pip install fieldhub-*.whl` gets.
#
# .venv holds maturin and the test tools, and the wheel too (for the other
# parts' tests and for people); it stays between runs, as does pip's cache,
# so re-runs are quick. The wheel is built by the venv's maturin (no
# isolated build environment to set up) into cargo's incremental target
# directory, with the release profile (python/pyproject.toml): the build of
# the fieldhub command (RELEASE_BUILD in the Makefile, which resolves
# features as this build does), whose compiled dependencies it shares. Under
# a test part that profile and directory are the test build's (the Makefile's
# TEST_TARGET_DIR), so the tests' wheel is built from the tests' build.

VENV := $(CURDIR)/.venv
VENV_PY := $(VENV)/bin/python
VENV_PIP := $(VENV)/bin/pip
WHEEL_DIR := $(CURDIR)/target/wheels
WHEEL_VENV := $(CURDIR)/target/wheel-venv
# Real third-party programs the tests run against a hub (asammdf: reads and
# writes the MDF4 files `fieldhub convert` is checked with; ldfparser: reads
# the LDFs LIN channels are configured from).
PYTHON_TEST_PROGRAMS := canopen can-isotp udsoncan cantools can-cannelloni==0.1.0 asammdf ldfparser
PYTHON_TEST_TOOLS := "maturin>=1.5,<2" "python-can>=4.2" $(PYTHON_TEST_PROGRAMS) pytest

.PHONY: test-python python-tools python-env wheel

# Debian's python3 creates venvs only with python3-venv (ensurepip); a
# failed attempt leaves a venv without pip, hence pip as the target.
$(VENV_PIP):
	$(call need,test-python,$(PYTHON))
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); \
	  echo "test-python: cannot create a venv with $(PYTHON) -m venv (Debian: python3-venv); run make deps"; exit 1; }
	$(VENV_PY) -m pip install -q --upgrade pip

wheel: $(VENV_PIP)
	$(VENV_PY) -m pip install -q "maturin>=1.5,<2"
	rm -rf $(WHEEL_DIR)
	$(VENV)/bin/maturin build --quiet --locked -m python/Cargo.toml -o $(WHEEL_DIR)

# The venv's test tools without the wheel: the Rust system tests run python
# programs too (the rest-bus test decodes the simulated network with cantools).
python-tools: $(VENV_PIP)
	$(VENV_PY) -m pip install -q $(PYTHON_TEST_TOOLS)

test-rust: python-tools

python-env: python-tools wheel
	$(VENV_PY) -m pip install -q --force-reinstall --no-deps $(WHEEL_DIR)/fieldhub-*.whl

test-python: python-env
	rm -rf $(WHEEL_VENV)
	$(VENV_PY) -m venv $(WHEEL_VENV)
	$(WHEEL_VENV)/bin/python -m pip install -q $(WHEEL_DIR)/fieldhub-*.whl $(PYTHON_TEST_PROGRAMS) pytest
	# The TLS tests' certificates, from the test build.
	$(CARGO) build --locked --release -p fieldhub-testkit --bin fieldhub-test-certs
	# From tests/, so the source tree does not shadow the installed package.
	# The C library `make test-c` installed serves the C-beside-Python test.
	cd python/tests && FIELDHUB_C_PREFIX=$(C_PREFIX) FIELDHUB_TEST_CERTS=$(TEST_TARGET_DIR)/release/fieldhub-test-certs \
	  $(WHEEL_VENV)/bin/pytest -q -p no:cacheprovider .

TEST_PARTS += test-python
