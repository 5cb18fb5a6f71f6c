"""A CAN XL frame as a python-can message: :class:`CanXlMessage`.

python-can's ``Message`` has no CAN XL form, so a bus on a ``protocol =
"canxl"`` channel hands out this subclass of it for XL frames (CAN FD and
classic frames stay plain ``Message`` objects): everything that takes a
``can.Message`` takes it, and the XL header is in attributes of its own
(spec/protocol.md 4.1.2, the fields of Linux's ``struct canxl_frame``):

- ``arbitration_id``: the 11-bit priority identifier;
- ``data`` and ``dlc``: the 1..2048 data bytes and how many;
- ``xl_vcid``: the virtual CAN network id (0..255);
- ``xl_sdt``: the SDU type (0..255);
- ``xl_sec``: the SEC bit (simple extended content);
- ``xl_rrs``: the RRS bit is recessive;
- ``xl_acceptance_field``: the 32-bit acceptance field.

``is_fd``, ``is_extended_id``, ``is_remote_frame``, ``bitrate_switch`` and
``error_state_indicator`` stay False: they are CAN FD's and classic CAN's.
Send one with ``bus.send(CanXlMessage(arbitration_id=0x123, data=...,
xl_vcid=..., ...))``; the port needs ``fd=True``.
"""

from typing import Any, Dict, Optional

from can import Message


class CanXlMessage(Message):
    """A CAN XL frame (module doc)."""

    __slots__ = ("xl_vcid", "xl_sdt", "xl_sec", "xl_rrs", "xl_acceptance_field")

    def __init__(
        self,
        *,
        xl_vcid: int = 0,
        xl_sdt: int = 0,
        xl_sec: bool = False,
        xl_rrs: bool = False,
        xl_acceptance_field: int = 0,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("check", False)
        data = kwargs.get("data")
        if data is not None and "dlc" not in kwargs:
            kwargs["dlc"] = len(data)
        super().__init__(**kwargs)
        self.xl_vcid = xl_vcid
        self.xl_sdt = xl_sdt
        self.xl_sec = xl_sec
        self.xl_rrs = xl_rrs
        self.xl_acceptance_field = xl_acceptance_field

    def __str__(self) -> str:
        header = (
            f"XL prio {self.arbitration_id:03X} VCID {self.xl_vcid:02X} SDT {self.xl_sdt:02X} "
            f"AF {self.xl_acceptance_field:08X}{' SEC' if self.xl_sec else ''}{' RRS' if self.xl_rrs else ''}"
        )
        shown = " ".join(f"{b:02X}" for b in self.data[:64])
        more = " ..." if len(self.data) > 64 else ""
        return f"Timestamp: {self.timestamp:15.6f}    {header}    DL: {self.dlc:4d}    {shown}{more}"

    def _xl_fields(self) -> Dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}

    def __repr__(self) -> str:
        xl = ", ".join(f"{name}={value!r}" for name, value in self._xl_fields().items())
        return super().__repr__().replace("can.Message(", "fieldhub.CanXlMessage(", 1)[:-1] + f", {xl})"

    # python-can's copies build a plain Message: keep the XL header.
    def __copy__(self) -> "CanXlMessage":
        return self._with(Message.__copy__(self))

    def __deepcopy__(self, memo: Optional[Dict[int, Any]]) -> "CanXlMessage":
        return self._with(Message.__deepcopy__(self, memo))

    def _with(self, plain: Message) -> "CanXlMessage":
        fields = {name: getattr(plain, name) for name in Message.__slots__ if name != "__weakref__"}
        return CanXlMessage(**self._xl_fields(), **fields)

    def equals(self, other: Message, timestamp_delta: Any = 1.0e-6, check_channel: bool = True,
               check_direction: bool = True) -> bool:
        """python-can's comparison, and the XL header too."""
        same_xl = isinstance(other, CanXlMessage) and self._xl_fields() == other._xl_fields()
        return same_xl and super().equals(other, timestamp_delta, check_channel, check_direction)
