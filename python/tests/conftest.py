"""Tests run against private hubs from the package's own pytest plugin
(the ``fieldhub_hub`` fixture), so they need nothing running beforehand."""

import signal

# Tests started in the background (`make test &`) inherit SIGINT ignored, and
# an ignored signal stays ignored in every program they start: the Ctrl-C
# tests' children would never see it. Python's own handler here makes the
# children start with SIGINT at its default, as from a terminal.
signal.signal(signal.SIGINT, signal.default_int_handler)
