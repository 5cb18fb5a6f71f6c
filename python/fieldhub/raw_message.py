"""A raw frame as a python-can message: :class:`RawMessage`.

A ``protocol = "raw"`` channel carries frames of a bus the hub has no model
of (spec/protocol.md 4.1.3): a 32-bit identifier the channel's access rules
read and 0..2048 opaque bytes. python-can's ``Message`` has no such kind, so
a bus on a raw channel hands out this subclass of it: everything that takes
a ``can.Message`` takes it, and ``isinstance(msg, fieldhub.RawMessage)``
tells it from a CAN frame.

- ``arbitration_id``: the 32-bit identifier (all 32 bits are the id: there
  is no extended flag);
- ``data`` and ``dlc``: the 0..2048 bytes and how many.

``is_fd``, ``is_extended_id``, ``is_remote_frame``, ``bitrate_switch`` and
``error_state_indicator`` stay False. Send one with
``bus.send(RawMessage(arbitration_id=0xDEADBEEF, data=payload))``; a raw
channel refuses CAN, CAN FD and CAN XL frames, and other channels refuse
raw ones (``flush_tx_buffer`` raises naming the refusal).
"""

from typing import Any, Dict, Optional

from can import Message


class RawMessage(Message):
    """A raw frame (module doc)."""

    __slots__ = ()

    def __init__(self, **kwargs: Any) -> None:
        # python-can's checks are CAN's (an 11- or 29-bit id, 8 or 64
        # bytes); the hub checks a raw frame's own limits.
        kwargs.setdefault("check", False)
        data = kwargs.get("data")
        if data is not None and "dlc" not in kwargs:
            kwargs["dlc"] = len(data)
        super().__init__(**kwargs)

    def __str__(self) -> str:
        shown = " ".join(f"{b:02X}" for b in self.data[:64])
        more = " ..." if len(self.data) > 64 else ""
        return f"Timestamp: {self.timestamp:15.6f}    RAW id {self.arbitration_id:08X}    DL: {self.dlc:4d}    {shown}{more}"

    def __repr__(self) -> str:
        return super().__repr__().replace("can.Message(", "fieldhub.RawMessage(", 1)

    # python-can's copies build a plain Message: keep the kind.
    def __copy__(self) -> "RawMessage":
        return self._with(Message.__copy__(self))

    def __deepcopy__(self, memo: Optional[Dict[int, Any]]) -> "RawMessage":
        return self._with(Message.__deepcopy__(self, memo))

    def _with(self, plain: Message) -> "RawMessage":
        return RawMessage(**{name: getattr(plain, name) for name in Message.__slots__ if name != "__weakref__"})

    def equals(self, other: Message, timestamp_delta: Any = 1.0e-6, check_channel: bool = True,
               check_direction: bool = True) -> bool:
        """python-can's comparison, and both raw."""
        return isinstance(other, RawMessage) and super().equals(other, timestamp_delta, check_channel, check_direction)
