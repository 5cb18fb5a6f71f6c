# The Python package (python/): python-can interface, hub control, pytest plugin.
#
#   make test-python   create .venv if needed, install the test tools and
#                      `pip install ./python` into it, run the Python tests.

PYTHON ?= python3
VENV := $(CURDIR)/.venv
VENV_PY := $(VENV)/bin/python

.PHONY: test-python python-env

$(VENV_PY):
	$(PYTHON) -m venv $(VENV)
	$(VENV_PY) -m pip install -q --upgrade pip

python-env: $(VENV_PY)
	$(VENV_PY) -m pip install -q "maturin>=1.5,<2" "python-can>=4.2" canopen pytest
	$(VENV_PY) -m pip install -q ./python

test-python: python-env
	# From tests/, so the source tree does not shadow the installed package.
	cd python/tests && $(VENV)/bin/pytest -q -p no:cacheprovider .

TEST_PARTS += test-python
