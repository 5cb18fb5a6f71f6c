"""Periodic sending in virtual time: python-can's ``send_periodic`` on a
synchronised bus.

python-can's own periodic tasks are threads timed by the wall clock; on a
hub in virtual time that clock means nothing. A :class:`VirtualPeriodicTask`
keeps its period in bus time instead: :meth:`fieldhub.bus.FieldhubBus.step`
cuts each step at the tasks' due times and sends their frames there, so a
frame sent every 100 ms leaves at 0, 100, 200 ms … of bus time exactly, however
long the program takes to compute.
"""

from typing import Callable, List, Optional, Sequence, Union

from can import Message
from can.broadcastmanager import (
    LimitedDurationCyclicSendTaskABC,
    ModifiableCyclicTaskABC,
    RestartableCyclicTaskABC,
)


class VirtualPeriodicTask(LimitedDurationCyclicSendTaskABC, ModifiableCyclicTaskABC, RestartableCyclicTaskABC):
    """Sends ``messages`` in turn every ``period`` seconds of bus time, for
    ``duration`` seconds of bus time (None: until stopped)."""

    def __init__(
        self,
        bus,
        messages: Union[Sequence[Message], Message],
        period: float,
        duration: Optional[float],
        autostart: bool,
        modifier_callback: Optional[Callable[[Message], None]],
    ) -> None:
        super().__init__(messages, period, duration)
        if self.period_ns <= 0:
            raise ValueError(f"period = {period!r}: a periodic task needs a period of at least 1 ns")
        self._bus = bus
        self._modifier = modifier_callback
        self._index = 0
        #: Bus time (ns) of the next frame; None while stopped.
        self.next_ns: Optional[int] = None
        self._end_ns: Optional[int] = None
        if autostart:
            self.start()

    def start(self) -> None:
        """Start (again) at the current bus time."""
        now = self._bus.now_ns
        self.next_ns = now
        self._end_ns = None if self.duration is None else now + int(round(self.duration * 1e9))
        self._bus._virtual_tasks.append(self)

    def stop(self) -> None:
        self.next_ns = None
        try:
            self._bus._virtual_tasks.remove(self)
        except ValueError:
            pass  # already stopped

    def send_due(self, now_ns: int) -> None:
        """Send what is due at bus time ``now_ns`` and schedule the next frame."""
        while self.next_ns is not None and self.next_ns <= now_ns:
            if self._end_ns is not None and self.next_ns >= self._end_ns:
                self.stop()
                return
            message = self.messages[self._index]
            if self._modifier is not None:
                self._modifier(message)
            self._bus.send(message)
            self._index = (self._index + 1) % len(self.messages)
            self.next_ns += self.period_ns


def send_due(tasks: List[VirtualPeriodicTask], now_ns: int) -> Optional[int]:
    """Send every task's frames due at ``now_ns``, in the order the tasks
    were started (so a run is the same every time); returns the bus time of
    the next frame any task sends, or None."""
    for task in list(tasks):
        task.send_due(now_ns)
    upcoming = [task.next_ns for task in tasks if task.next_ns is not None]
    return min(upcoming) if upcoming else None
