"""fieldhub for Python.

- :class:`fieldhub.bus.FieldhubBus` is a python-can interface:
  ``can.Bus(interface="fieldhub", channel="can0", hub="tcp://127.0.0.1:29536")``.
- :class:`fieldhub.hub.Hub` starts a private hub (or attaches to a running
  one) and drives its control API: wiring, faults, recording, statistics.
- :class:`fieldhub.lin_message.LinMessage` is what a bus on a LIN channel
  receives: a ``can.Message`` with the LIN frame's checksum and marks.
- :class:`fieldhub.canxl_message.CanXlMessage` is a CAN XL frame on a
  ``protocol = "canxl"`` channel: a ``can.Message`` with the XL header.
- :class:`fieldhub.raw_message.RawMessage` is a raw frame on a
  ``protocol = "raw"`` channel: a ``can.Message`` with a 32-bit id.
- :class:`fieldhub.rbs.RestBus` sets, ramps, stops and starts a hub's
  rest-bus simulation by signal name (``hub.rbs()``, ``hub.start_rbs(...)``).
- The pytest plugin gives every test its own hub: the ``fieldhub_hub`` fixture.

The protocol is implemented once, in Rust (``fieldhub._native``); this package
only adapts it to Python.
"""

from fieldhub.bus import FieldhubBus
from fieldhub.canxl_message import CanXlMessage
from fieldhub.errors import FieldhubError, HubError, HubStartError, HubUnreachable
from fieldhub.hub import Hub
from fieldhub.lin_message import LinMessage
from fieldhub.raw_message import RawMessage
from fieldhub.rbs import RestBus

__all__ = ["CanXlMessage", "FieldhubBus", "FieldhubError", "Hub", "HubError", "HubStartError", "HubUnreachable", "LinMessage", "RawMessage", "RestBus"]
