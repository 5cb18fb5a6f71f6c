# The web monitor (/ui): browser tests in headless Chromium.
#
#   make test-ui   pip-install Playwright (and cantools, the DBC reference)
#                  into the Python venv (python-env), build the hub, and run
#                  tests/ui against real hub processes and real clients.
#
# Playwright drives Debian's chromium (`make deps` installs it) through its
# executable path: its own browser download is never used. Screenshots land in docs/monitor/.

UI_TEST_TOOLS := "playwright>=1.40" "cantools>=39"
CHROMIUM ?= /usr/bin/chromium

.PHONY: test-ui ui-env

ui-env: python-env
	@test -x $(CHROMIUM) || { echo "test-ui: $(CHROMIUM) is missing; run make deps (Debian's chromium)"; exit 1; }
	$(VENV_PY) -m pip install -q $(UI_TEST_TOOLS)

test-ui: ui-env
	$(WORKSPACE_BUILD)
	cd tests/ui && FIELDHUB_BIN=$(TEST_BIN) \
	  CHROMIUM="$(CHROMIUM)" $(VENV)/bin/pytest -q -p no:cacheprovider .

TEST_PARTS += test-ui
