"""A LIN frame as a python-can message: :class:`LinMessage`.

python-can's ``Message`` knows CAN only, and no python-can interface carries
LIN, so a bus on a ``protocol = "lin"`` channel hands out this subclass of it:
everything that takes a ``can.Message`` (a ``Notifier``, a logger, ``print``)
takes it, and the LIN details a LIN user needs are attributes of their own
(spec/protocol.md 4.1.1):

- ``arbitration_id``: the frame identifier, 0..0x3F; ``lin_protected_id`` the
  identifier with its two parity bits, as the header carries it;
- ``data`` and ``dlc``: the response's bytes and how many (0: no response);
- ``lin_checksum``: the checksum byte as the bus carried it (0 with no response);
- ``lin_checksum_model``: ``"classic"`` (over the data) or ``"enhanced"``
  (over the protected identifier and the data);
- ``lin_no_response``: the header went out and no slave answered;
- ``lin_checksum_error``: the checksum byte is not the one its model gives (a
  receiving node discards such a response);
- ``lin_collision``: slaves answered an event-triggered header together;
  ``data`` and ``lin_checksum`` are what the bus read (their bits ANDed);
- ``lin_wake_up``: a wake-up pulse on the sleeping bus (identifier 0, no data;
  the go-to-sleep command is the frame 0x3C ``00 FF FF FF FF FF FF FF``).

These marks are not CAN's: ``is_error_frame`` stays False (a python-can error
frame's identifier is a CAN error class), and ``is_extended_id``,
``is_remote_frame``, ``bitrate_switch`` and ``error_state_indicator``, whose
flag bits LIN reuses on the wire, stay False.
"""

from typing import Any, Dict, Optional

from can import Message

CLASSIC, ENHANCED = "classic", "enhanced"


def protected_id(frame_id: int) -> int:
    """The identifier with its parity bits: P0 = ID0^ID1^ID2^ID4 (bit 6),
    P1 = not(ID1^ID3^ID4^ID5) (bit 7)."""
    bit = [(frame_id >> k) & 1 for k in range(6)]
    p0 = bit[0] ^ bit[1] ^ bit[2] ^ bit[4]
    p1 = 1 ^ bit[1] ^ bit[3] ^ bit[4] ^ bit[5]
    return frame_id | p0 << 6 | p1 << 7


class LinMessage(Message):
    """A LIN frame received from the hub (module doc)."""

    __slots__ = (
        "lin_checksum",
        "lin_checksum_model",
        "lin_no_response",
        "lin_checksum_error",
        "lin_collision",
        "lin_wake_up",
    )

    def __init__(
        self,
        *,
        lin_checksum: int = 0,
        lin_checksum_model: str = ENHANCED,
        lin_no_response: bool = False,
        lin_checksum_error: bool = False,
        lin_collision: bool = False,
        lin_wake_up: bool = False,
        **message: Any,
    ) -> None:
        if lin_checksum_model not in (CLASSIC, ENHANCED):
            raise ValueError(f"lin_checksum_model {lin_checksum_model!r} is neither 'classic' nor 'enhanced'")
        # A LIN identifier is 6 bits; python-can's default is an extended id.
        message.setdefault("is_extended_id", False)
        super().__init__(**message)
        self.lin_checksum = lin_checksum
        self.lin_checksum_model = lin_checksum_model
        self.lin_no_response = lin_no_response
        self.lin_checksum_error = lin_checksum_error
        self.lin_collision = lin_collision
        self.lin_wake_up = lin_wake_up

    @property
    def lin_protected_id(self) -> int:
        """The identifier with its parity bits, as the header carries it."""
        return protected_id(self.arbitration_id)

    def _lin_fields(self) -> Dict[str, Any]:
        return {name: getattr(self, name) for name in LinMessage.__slots__}

    def __str__(self) -> str:
        marks = [f"LIN {self.lin_checksum_model} checksum {self.lin_checksum:02X}"]
        marks += [name for name in ("no_response", "checksum_error", "collision", "wake_up") if getattr(self, f"lin_{name}")]
        return f"{super().__str__()}  {' '.join(marks)}"

    def __repr__(self) -> str:
        lin = ", ".join(
            f"{name}={value:#04x}" if name == "lin_checksum" else f"{name}={value!r}"
            for name, value in self._lin_fields().items()
        )
        return super().__repr__().replace("can.Message(", "fieldhub.LinMessage(", 1)[:-1] + f", {lin})"

    # python-can's copies build a plain Message: keep the LIN details.
    def __copy__(self) -> "LinMessage":
        return self._with(Message.__copy__(self))

    def __deepcopy__(self, memo: Optional[Dict[int, Any]]) -> "LinMessage":
        return self._with(Message.__deepcopy__(self, memo))

    def _with(self, plain: Message) -> "LinMessage":
        fields = {name: getattr(plain, name) for name in Message.__slots__ if name != "__weakref__"}
        return LinMessage(**self._lin_fields(), **fields, check=False)
