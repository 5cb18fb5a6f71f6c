"""pytest plugin (entry point ``pytest11``): a fresh hub for every test.

::

    def test_ecu_answers(fieldhub_hub):
        tester = fieldhub_hub.bus("can0")
        ...

``fieldhub_hub`` is a :class:`fieldhub.Hub` with the built-in configuration
(channels ``can0`` and ``can1``) that records into a private temporary
``recordings_dir``, stopped after the test even when it fails;
buses opened with ``fieldhub_hub.bus()`` are shut down too. Mark a test with
``@pytest.mark.fieldhub_config("…toml…")`` to give its hub a configuration,
and with ``@pytest.mark.fieldhub_config(time="virtual")`` (with or without a
configuration) to run it in virtual time: buses opened with
``fieldhub_hub.bus("can0", synchronized=True)`` step bus time themselves, so
a minute of traffic takes as long as the test computes.
"""

import shutil
import tempfile
from typing import Iterator, List

import pytest

from fieldhub.hub import Hub


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        'fieldhub_config(text=None, time=None): TOML configuration for the test\'s fieldhub_hub; time="virtual" runs '
        "it in virtual time",
    )


class _TestHub(Hub):
    """A hub that shuts down the buses it opened when it stops."""

    def __init__(self, config, time):
        self._buses: List = []
        self._recordings = tempfile.mkdtemp(prefix="fieldhub-recordings-")
        super().__init__(config, recordings_dir=self._recordings, time=time)

    def bus(self, channel: str = "can0", **kwargs):
        bus = super().bus(channel, **kwargs)
        self._buses.append(bus)
        return bus

    def stop(self) -> None:
        for bus in getattr(self, "_buses", []):
            bus.shutdown()
        self._buses = []
        super().stop()
        shutil.rmtree(self._recordings, ignore_errors=True)


@pytest.fixture
def fieldhub_hub(request: pytest.FixtureRequest) -> Iterator[Hub]:
    marker = request.node.get_closest_marker("fieldhub_config")
    config = marker.args[0] if marker and marker.args else (marker.kwargs.get("text") if marker else None)
    hub = _TestHub(config, marker.kwargs.get("time") if marker else None)
    try:
        yield hub
    finally:
        hub.stop()
