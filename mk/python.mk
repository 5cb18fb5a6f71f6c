# The Python package (python/): python-can interface, hub control, pytest plugin.
#
#   make test-python   create .venv if needed, install the test tools and
#                      `pip install ./python` into it, run the Python tests.
#
# Re-runs are quick: the venv stays, pip skips tools already installed, and
# the package is built with the venv's maturin (no isolated build
# environment to set up) into cargo's incremental target directory.

PYTHON ?= python3
VENV := $(CURDIR)/.venv
VENV_PY := $(VENV)/bin/python
VENV_PIP := $(VENV)/bin/pip
PYTHON_TEST_TOOLS := "maturin>=1.5,<2" "python-can>=4.2" canopen pytest

.PHONY: test-python python-env

# Debian's python3 creates venvs only with python3-venv (ensurepip); a
# failed attempt leaves a venv without pip, hence pip as the target.
$(VENV_PIP):
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); \
	  echo "test-python: installing python3-venv (Debian) to create $(VENV)"; \
	  apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null && $(PYTHON) -m venv $(VENV); } || { \
	  echo "test-python: cannot create a venv with $(PYTHON) -m venv; install python3-venv"; exit 1; }
	$(VENV_PY) -m pip install -q --upgrade pip

python-env: $(VENV_PIP)
	$(VENV_PY) -m pip install -q $(PYTHON_TEST_TOOLS)
	PATH="$(VENV)/bin:$$PATH" $(VENV_PY) -m pip install -q --no-build-isolation ./python

test-python: python-env
	# From tests/, so the source tree does not shadow the installed package.
	cd python/tests && $(VENV)/bin/pytest -q -p no:cacheprovider .

TEST_PARTS += test-python
