"""Errors of the fieldhub package.

Bus errors are python-can's own (``can.CanInitializationError`` when a bus
cannot be opened, ``can.CanOperationError`` when a running bus fails), so
python-can programs handle them unchanged. Control API errors are
:class:`HubError`, which carries the hub's status code and message; a
private hub that cannot start raises :class:`HubStartError`.
"""

import can

from fieldhub import _native


class FieldhubError(can.CanError):
    """Base of fieldhub's own errors."""


class HubError(FieldhubError):
    """The hub refused a control request: ``status`` is the HTTP status, the
    message is the hub's explanation."""

    def __init__(self, status: int, message: str):
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


class HubUnreachable(FieldhubError):
    """The hub's control API cannot be reached."""


class HubStartError(FieldhubError, can.CanInitializationError):
    """A private hub did not start; the message is what the hub said (for a
    bad configuration: the line and field)."""


def translate(error: "_native.Error", opening: bool) -> can.CanError:
    """A native error as the python-can error a caller expects."""
    kind = getattr(error, "kind", "closed")
    message = str(error)
    if kind == "timeout":
        return can.CanOperationError(message)
    if opening or kind in ("connect", "refused", "invalid"):
        return can.CanInitializationError(message)
    return can.CanOperationError(message)
