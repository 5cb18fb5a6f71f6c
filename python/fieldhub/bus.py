"""The python-can interface ``fieldhub``.

::

    import can
    bus = can.Bus(interface="fieldhub", channel="can0", hub="tcp://127.0.0.1:29536")

Keyword arguments (also from python-can's config file or ``CAN_*``
environment): ``hub`` (URL, default ``$FIELDHUB_HUB`` or the local hub),
``port_name`` (a port name, e.g. one the hub's configuration wires;
python-can reserves ``port`` for numbers), ``fd``,
``receive_own_messages``, ``block_on_overflow`` (hold the bus instead of
dropping frames when this reader lags), ``state`` (``can.BusState.PASSIVE``:
listen-only), ``token``, ``timeout`` (seconds for connecting and requests),
``synchronized`` (a participant of the hub's virtual time, below), and for a
``tls://HOST:PORT`` hub ``tls_ca`` (PEM CA bundle to trust the hub's
certificate with), ``tls_cert`` and ``tls_key`` (this client's certificate,
for a hub with mutual TLS) and ``tls_server_name`` (the name the hub's
certificate holds, when not HOST); each defaults to its ``FIELDHUB_TLS_*``
environment variable.

On a hub in virtual time (``[hub] time = "virtual"``, ``fieldhub.Hub(time="virtual")``)
a bus opened with ``synchronized=True`` is a participant: bus time advances
only when it calls ``bus.step(seconds)`` (and every other participant is done
too); ``bus.now`` is the bus time it stands at, and frames carry bus time as
their timestamp. ``send_periodic`` on it keeps its period in bus time. A bus
without the option observes: it sends and receives, and time never waits for it.
A participant's ``send`` never waits for bus time (its sends are part of its
step): on an overloaded channel its frames queue in the hub and go out in the
following steps, in arbitration order. When more than 256 of them wait at a step
boundary the hub says so (``tx_queue_full``), ``bus.tx_queue_full`` is true and
``send(msg, timeout=0)`` raises ``can.CanOperationError`` naming ``queue_full``
until a step ends with the queue back under 256; past 16,384 waiting frames the
hub refuses further ones, and ``flush_tx_buffer()`` raises naming how many
(``tx_dropped_by_reason`` ``queue_full`` in the hub's stats; docs/virtual-time.md).

As on a SocketCAN bus: ``fd=True`` needs a CAN FD channel (refused at open on
a classic one); a bus opened without it neither receives nor sends CAN FD
frames (``send`` raises ``can.CanOperationError``); a CAN FD message of 9–11,
13–15, … bytes goes out padded with zeros to the next CAN FD length (12, 16, …),
as python-can's socketcan interface sends it. A listen-only bus
(``state=can.BusState.PASSIVE``, or ``bus.state = ...`` as ``python -m
can.logger --passive`` does) receives everything but never transmits or
acknowledges; changing the state reopens the port, as a SocketCAN interface
must be taken down to change its mode.

A frame the hub takes off the bus (the controller went bus-off, a fault rule
dropped it, a federated channel's owner died first, the port is unplugged;
docs/frame-fate.md) is never silently gone: ``flush_tx_buffer()`` waits until
every frame sent before is on the bus or reported, and raises
``can.CanOperationError`` naming how many and why (one report per call: call it
again until it returns to hear of all of them). ``send()`` only queues, as
python-can's ``send`` does on SocketCAN.

Filters are applied in the client before Python sees a frame; ``fileno()``
works with ``select``/asyncio; every wait releases the GIL, and Ctrl-C
interrupts it (``KeyboardInterrupt``). ``shutdown()`` is safe from any
thread at any time: a ``recv()`` or ``send()`` blocked in another thread (a
``can.Notifier``, a periodic task) returns with ``can.CanOperationError``.
A script may end (or take an uncaught Ctrl-C) while such a thread still waits:
the interpreter exits as with python-can's own buses.
"""

import atexit
import logging
import os
import time
import warnings
from typing import Any, List, Optional, Tuple

import can
from can import BusABC, CanProtocol, Message

from fieldhub import _native
from fieldhub.errors import translate
from fieldhub.canxl_message import CanXlMessage
from fieldhub.raw_message import RawMessage
from fieldhub.lin_message import CLASSIC, ENHANCED, LinMessage
from fieldhub.periodic import VirtualPeriodicTask, send_due

_log = logging.getLogger("can.fieldhub")

CAN_EFF_FLAG = 0x80000000
CAN_RTR_FLAG = 0x40000000
CAN_ERR_MASK = 0x1FFFFFFF

_EXTENDED, _REMOTE, _BRS, _ESI, _ECHO = 0x01, 0x02, 0x04, 0x08, 0x10
# The same bits on a LIN record (FrameFlags::LIN_* in fieldhub-proto), and its own wake-up pulse.
_LIN_CLASSIC, _LIN_NO_RESPONSE, _LIN_CHECKSUM_ERROR, _LIN_COLLISION = _EXTENDED, _REMOTE, _BRS, _ESI
_LIN_WAKE_UP = 0x40
# The same bits on a CAN XL record: SEC and RRS (spec/protocol.md 4.2).
_XL_SEC, _XL_RRS = 0x01, 0x02


def default_hub() -> str:
    """``$FIELDHUB_HUB``, else the local hub: over shared memory when it
    serves ``shm://default``, else ``tcp://127.0.0.1:29536``."""
    return _native.default_hub_url()


def _flag(name: str, value: Any) -> bool:
    """A yes/no option; python-can's config file and ``CAN_CONFIG`` give strings."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off", ""):
            return False
        raise can.CanInitializationError(f"{name} = {value!r}: expected true or false")
    return bool(value)


def _path(value: Any) -> Optional[str]:
    """A file setting (``tls_ca`` ...): a ``str`` or ``os.PathLike``, ``None`` for the environment's."""
    return None if value is None else os.fspath(value)


def _seconds(name: str, value: Any) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if not seconds >= 0:
        raise can.CanInitializationError(f"{name} = {value!r}: expected a number of seconds")
    return seconds


def _xl_message(channel: str, prio_vcid: int, flags: int, data: bytes, timestamp_ns: int, sdt: int, af: int) -> CanXlMessage:
    """A received CAN XL record (spec/protocol.md 4.1.2) as a CanXlMessage:
    the record's id holds the priority and the VCID, its len8_dlc the SDT."""
    return CanXlMessage(
        timestamp=timestamp_ns / 1e9,
        arbitration_id=prio_vcid & 0x7FF,
        is_extended_id=False,
        is_rx=not flags & _ECHO,
        channel=channel,
        data=data,
        xl_vcid=(prio_vcid >> 16) & 0xFF,
        xl_sdt=sdt,
        xl_sec=bool(flags & _XL_SEC),
        xl_rrs=bool(flags & _XL_RRS),
        xl_acceptance_field=af,
    )


def _raw_message(channel: str, frame_id: int, flags: int, data: bytes, timestamp_ns: int) -> RawMessage:
    """A received raw record (spec/protocol.md 4.1.3) as a RawMessage."""
    return RawMessage(
        timestamp=timestamp_ns / 1e9,
        arbitration_id=frame_id,
        is_extended_id=False,
        is_rx=not flags & _ECHO,
        channel=channel,
        data=data,
    )


def _lin_message(channel: str, frame_id: int, flags: int, data: bytes, timestamp_ns: int, checksum: int) -> LinMessage:
    """A received LIN record (spec/protocol.md 4.1.1) as a LinMessage: LIN
    reuses the flag bits of CAN's extended, remote, BRS and ESI for its
    checksum model and the hub's no-response, checksum-error and collision
    marks, which must not show as those."""
    return LinMessage(
        timestamp=timestamp_ns / 1e9,
        arbitration_id=frame_id,
        is_rx=not flags & _ECHO,
        channel=channel,
        dlc=len(data),
        data=data,
        check=False,
        lin_checksum=checksum,
        lin_checksum_model=CLASSIC if flags & _LIN_CLASSIC else ENHANCED,
        lin_no_response=bool(flags & _LIN_NO_RESPONSE),
        lin_checksum_error=bool(flags & _LIN_CHECKSUM_ERROR),
        lin_collision=bool(flags & _LIN_COLLISION),
        lin_wake_up=bool(flags & _LIN_WAKE_UP),
    )


def _bus_ns(name: str, seconds: Any) -> int:
    """A span or point of bus time given in seconds, in nanoseconds."""
    try:
        ns = int(round(float(seconds) * 1e9))
    except (TypeError, ValueError, OverflowError):
        ns = -1
    if ns < 0:
        raise ValueError(f"{name} = {seconds!r}: expected a number of seconds of bus time, not negative")
    return ns


# Keywords python-can itself hands every interface (its config sources and
# Bus(); its tools add single_handle, for interfaces whose driver shares one
# handle between threads); the fieldhub bus reads none of them but has
# nothing to warn about.
_PYTHON_CAN_KEYWORDS = {"interface", "bustype", "context", "auto_reset", "ignore_config", "single_handle"}

# CAN FD's lengths: a payload of another length is padded to the next one.
_FD_LENGTHS = (0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64)


def _fd_padded(data: bytes) -> bytes:
    """``data`` with zeros up to the next CAN FD length (9 bytes become 12),
    as python-can's socketcan interface and the kernel send it."""
    for length in _FD_LENGTHS:
        if len(data) <= length:
            return data.ljust(length, b"\x00")
    return data


@atexit.register
def _wait_for_calls_at_exit() -> None:
    """At interpreter exit, let no thread come back into Python from a wait
    in the extension (a ``can.Notifier``'s ``recv()``): one that did while
    the interpreter finalizes would abort the process. Threads that come
    back from now on stay parked until the process ends, as daemon threads
    do; this waits (releasing the GIL) for those between the two, each at
    most one wait slice or one request's timeout."""
    _native.begin_exit()
    while _native.calls_in_progress():
        time.sleep(0.001)


def _listen_only(state: Any) -> bool:
    # python-can's config file and CAN_CONFIG give strings.
    if isinstance(state, str):
        state = {"active": can.BusState.ACTIVE, "passive": can.BusState.PASSIVE}.get(state.strip().lower(), state)
    if state == can.BusState.PASSIVE:
        return True
    if state == can.BusState.ACTIVE:
        return False
    raise ValueError(f"state = {state!r}: a fieldhub bus is can.BusState.ACTIVE or can.BusState.PASSIVE (listen-only)")


def socketcan_filters(filters: Optional[can.typechecking.CanFilters]) -> Optional[List[Tuple[int, int]]]:
    """python-can filters as SocketCAN (can_id, can_mask) pairs."""
    if filters is None:
        return None
    pairs = []
    for f in filters:
        can_id, can_mask = f["can_id"], f["can_mask"]
        extended = f.get("extended")
        if extended is True:
            can_id, can_mask = can_id | CAN_EFF_FLAG, can_mask | CAN_EFF_FLAG
        elif extended is False:
            can_id, can_mask = can_id & ~CAN_EFF_FLAG, can_mask | CAN_EFF_FLAG
        pairs.append((can_id & 0xFFFFFFFF, can_mask & 0xFFFFFFFF))
    return pairs


class FieldhubBus(BusABC):
    """A port on a fieldhub channel."""

    def __init__(
        self,
        channel: Any = "can0",
        can_filters: Optional[can.typechecking.CanFilters] = None,
        hub: Optional[str] = None,
        port_name: Optional[str] = None,
        fd: bool = False,
        receive_own_messages: bool = False,
        block_on_overflow: bool = False,
        state: can.BusState = can.BusState.ACTIVE,
        token: Optional[str] = None,
        timeout: float = 5.0,
        synchronized: bool = False,
        ahead: bool = False,
        tls_ca: Optional[str] = None,
        tls_cert: Optional[str] = None,
        tls_key: Optional[str] = None,
        tls_server_name: Optional[str] = None,
        **kwargs: Any,
    ) -> None:
        self._native: Optional[_native.NativeClient] = None
        self._synchronized = _flag("synchronized", synchronized)
        ahead = _flag("ahead", ahead)
        if ahead and not self._synchronized:
            raise can.CanInitializationError(
                "ahead=True steps ahead in virtual time: open the bus with synchronized=True too"
            )
        #: Periodic tasks timed in bus time (synchronised buses only).
        self._virtual_tasks: List[VirtualPeriodicTask] = []
        fd = _flag("fd", fd)
        receive_own_messages = _flag("receive_own_messages", receive_own_messages)
        block_on_overflow = _flag("block_on_overflow", block_on_overflow)
        timeout = _seconds("timeout", timeout)
        # python-can's config sources turn "42" into 42; names stay names.
        port_name = None if port_name is None else str(port_name)
        token = None if token is None else str(token)
        #: The hub's URL; given none, the default the bus reached (``default_hub()``,
        #: or TCP when its shared memory cannot be used, logged in one line saying why).
        self.hub = hub or None
        self._channel_name = str(channel) if channel is not None else ""
        self._can_protocol = CanProtocol.CAN_FD if fd else CanProtocol.CAN_20
        self._port_options = (port_name, receive_own_messages, block_on_overflow, fd)
        self._listen_only = _listen_only(state)
        try:
            self._native = _native.NativeClient(
                self.hub,
                f"python-can.{self._channel_name or port_name}",
                token or os.environ.get("FIELDHUB_TOKEN"),
                timeout,
                self._synchronized,
                _path(tls_ca),
                _path(tls_cert),
                _path(tls_key),
                None if tls_server_name is None else str(tls_server_name),
                ahead=ahead,
            )
            self.hub = self._native.url
            if self._native.fallback:
                _log.warning("fieldhub: %s", self._native.fallback)
            self._open_port()
        except _native.Error as e:
            if self._native is not None:
                self._native.close()
            raise translate(e, opening=True) from None
        except can.CanInitializationError:
            self._native.close()
            raise
        self.channel_info = f"fieldhub {self.hub} {channel}"
        self._check_bitrates(kwargs.pop("bitrate", None), kwargs.pop("data_bitrate", None))
        unknown = sorted(set(kwargs) - _PYTHON_CAN_KEYWORDS)
        if unknown:
            warnings.warn(
                f"the fieldhub interface ignores {', '.join(unknown)}; it takes hub, port_name, fd, state,"
                " receive_own_messages, block_on_overflow, token, timeout, synchronized, tls_ca, tls_cert, tls_key,"
                " tls_server_name and can_filters",
                stacklevel=3,
            )
        super().__init__(channel=channel, can_filters=can_filters, **kwargs)

    def _check_bitrates(self, bitrate: Any, data_bitrate: Any) -> None:
        """A bus's bitrates are the hub's channel's, set in its configuration:
        a requested one that differs is refused, as a bus opened on a running
        SocketCAN interface at another bitrate would not work."""
        if bitrate is None and data_bitrate is None:
            return
        try:
            actual = self._native.channel_bitrates(self._port)
        except _native.Error as e:
            self._native.close()
            raise translate(e, opening=True) from None
        for name, asked, have in (("bitrate", bitrate, actual[0]), ("data_bitrate", data_bitrate, actual[1])):
            if asked is not None and int(asked) != have:
                self._native.close()
                raise can.CanInitializationError(
                    f"{name}={asked}, but channel {self._channel_name!r} runs at {have} bit/s; the hub's"
                    " configuration sets a channel's bitrates (leave them out, or ask for these)"
                )

    def _open_port(self) -> None:
        port_name, receive_own, block_on_overflow, fd = self._port_options
        self._port, _, _, channel_fd = self._native.open_port(
            self._channel_name, port_name, receive_own, block_on_overflow, fd, self._listen_only
        )
        if fd and not channel_fd:
            raise can.CanInitializationError(
                f"fd=True, but channel {self._channel_name!r} is classic CAN; open it without fd, or configure the"
                ' channel with protocol = "canfd"'
            )

    def _apply_filters(self, filters: Optional[can.typechecking.CanFilters]) -> None:
        try:
            self._native.set_filters(self._port, socketcan_filters(filters))
            self._is_filtered = filters is not None
        except _native.Error as e:
            raise translate(e, opening=False) from None

    def _recv_internal(self, timeout: Optional[float]) -> Tuple[Optional[Message], bool]:
        try:
            received = self._native.recv(timeout)
        except _native.Error as e:
            raise translate(e, opening=False) from None
        if received is None:
            return None, getattr(self, "_is_filtered", False)
        _, kind, can_id, flags, length, data, timestamp_ns, _, _, _, len8_dlc, af = received
        if kind == "canxl":
            return _xl_message(self._channel_name, can_id, flags, data, timestamp_ns, len8_dlc, af), getattr(
                self, "_is_filtered", False
            )
        if kind == "raw":
            return _raw_message(self._channel_name, can_id, flags, data, timestamp_ns), getattr(
                self, "_is_filtered", False
            )
        if kind == "lin":
            return _lin_message(self._channel_name, can_id, flags, data, timestamp_ns, len8_dlc), getattr(
                self, "_is_filtered", False
            )
        message = Message(
            timestamp=timestamp_ns / 1e9,
            arbitration_id=can_id,
            is_extended_id=bool(flags & _EXTENDED),
            is_remote_frame=bool(flags & _REMOTE),
            is_error_frame=kind == "error",
            is_fd=kind == "canfd",
            bitrate_switch=bool(flags & _BRS),
            error_state_indicator=bool(flags & _ESI),
            is_rx=not flags & _ECHO,
            channel=self._channel_name,
            dlc=length,
            data=data,
            check=False,
        )
        return message, getattr(self, "_is_filtered", False)

    def send(self, msg: Message, timeout: Optional[float] = None) -> None:
        self._send(msg, timeout, None)

    def send_at(self, msg: Message, seconds: float) -> None:
        """Send ``msg`` for bus time ``seconds`` of a later step of this
        participant (a bus opened with ``synchronized=True, ahead=True``): the
        hub holds it and puts it on the bus when bus time gets there, where
        it would have been had it been sent in the step starting then (at or
        before ``now``: at once). It must fall within the step the next
        ``step`` or ``step_ahead`` ends; a later one is refused then, and
        ``flush_tx_buffer`` raises naming it. Never waits for the hub."""
        self._send(msg, None, _bus_ns("seconds", seconds))

    def _send(self, msg: Message, timeout: Optional[float], at_ns: Optional[int]) -> None:
        if isinstance(msg, CanXlMessage):
            if at_ns is not None:
                raise can.CanOperationError("send_at carries CAN and CAN FD frames; send CAN XL frames with send")
            try:
                self._native.send_xl(
                    self._port,
                    msg.arbitration_id,
                    msg.xl_vcid,
                    msg.xl_sdt,
                    bool(msg.xl_sec),
                    bool(msg.xl_rrs),
                    msg.xl_acceptance_field,
                    bytes(msg.data),
                    timeout,
                )
            except _native.Error as e:
                raise self._send_error(e, timeout) from None
            except OverflowError as e:
                # As an invalid frame is: the VCID and SDT are bytes, the AF 32 bits.
                raise ValueError(f"{msg!r}: a CAN XL header field is out of range ({e})") from None
            return
        if isinstance(msg, RawMessage):
            if at_ns is not None:
                raise can.CanOperationError("send_at carries CAN and CAN FD frames; send raw frames with send")
            try:
                self._native.send_raw(self._port, msg.arbitration_id, bytes(msg.data), timeout)
            except _native.Error as e:
                raise self._send_error(e, timeout) from None
            except OverflowError as e:
                raise ValueError(f"{msg!r}: a raw frame's id is 32 bits ({e})") from None
            return
        data = bytes(msg.data) if not msg.is_remote_frame else b""
        if msg.is_error_frame:
            kind = "error"
        elif msg.is_fd:
            kind = "canfd"
            data = _fd_padded(data)
        else:
            kind = "can"
        try:
            self._native.send(
                self._port,
                kind,
                msg.arbitration_id & CAN_ERR_MASK,
                bool(msg.is_extended_id) and kind != "error",
                bool(msg.is_remote_frame),
                bool(msg.bitrate_switch),
                bool(msg.error_state_indicator),
                int(msg.dlc),
                data,
                timeout,
                at_ns,
            )
        except _native.Error as e:
            raise self._send_error(e, timeout) from None

    def _send_error(self, e: Exception, timeout: Optional[float]) -> Exception:
        """What a send that failed with `e` raises."""
        kind = getattr(e, "kind", "")
        if kind in ("not_allowed", "dropped"):
            return can.CanOperationError(str(e))
        if kind == "invalid":
            return ValueError(str(e))
        if kind == "timeout" and timeout == 0 and self._native.tx_queue_full():
            return can.CanOperationError(
                "queue_full: more than 256 frames of this participant wait in the hub (tx_queue_full at its last"
                " step): its channel carries less than it sends. They go on the bus in the coming steps; send"
                " without a timeout to queue anyway, or send less per step"
            )
        if kind == "timeout":
            return can.CanOperationError(
                f"timed out: the frame could not be queued within {timeout} s: the bus takes frames slower than they are"
                " sent (a receiver opened with block_on_overflow holds it, or the channel is busy)"
            )
        return translate(e, opening=False)

    # The LIN node API (a slave on a protocol = "lin" channel, whose master
    # is the hub running the schedule table; docs/buses.md). The hub's
    # refusals (an identifier its schedule never sends, another port
    # standing for it) are raised by the next flush_tx_buffer().

    def lin_publish(self, frame_id: int, data: bytes, classic: bool = False, timeout: Optional[float] = None) -> None:
        """Queue a one-shot response for LIN identifier `frame_id`: it answers the next header of it, once."""
        self._send_lin("publish", frame_id, data, classic, timeout)

    def lin_stand(self, frame_id: int, data: bytes, classic: bool = False, timeout: Optional[float] = None) -> None:
        """Set this port's standing response for `frame_id`: it answers every header of it from the next one on,
        until lin_stand replaces it or lin_withdraw withdraws it. A queued one-shot response answers first."""
        self._send_lin("stand", frame_id, data, classic, timeout)

    def lin_withdraw(self, frame_id: int, timeout: Optional[float] = None) -> None:
        """Withdraw this port's standing response for `frame_id`: from the next header on it answers no more."""
        self._send_lin("withdraw", frame_id, b"", False, timeout)

    def lin_wake_up(self, timeout: Optional[float] = None) -> None:
        """Send a wake-up pulse from this port: it wakes the sleeping channel, whose master resumes its schedule
        after the channel's wake_delay_ms and repeats the pulse for this port while no header comes. The hub
        refuses it on an awake channel (raised by the next flush_tx_buffer())."""
        self._send_lin("wake_up", 0, b"", False, timeout)

    def _send_lin(self, form: str, frame_id: int, data: bytes, classic: bool, timeout: Optional[float]) -> None:
        if not 0 <= frame_id <= 0x3F:
            raise ValueError(f"LIN frame identifier 0x{frame_id:X} is over 0x3F (6 bits)")
        try:
            self._native.send_lin(self._port, form, frame_id, bytes(data), classic, timeout)
        except _native.Error as e:
            raise self._send_error(e, timeout) from None

    def flush_tx_buffer(self) -> None:
        """Wait until every frame sent so far is on the bus."""
        try:
            self._native.flush()
        except _native.Error as e:
            raise translate(e, opening=False) from None

    @property
    def now_ns(self) -> int:
        """The bus time this participant stands at, in nanoseconds."""
        now = self._native.now()
        if now is None:
            raise can.CanOperationError("this bus is not a participant of virtual time; open it with synchronized=True")
        return now

    @property
    def now(self) -> float:
        """The bus time this participant stands at, in seconds."""
        return self.now_ns / 1e9

    def step(self, seconds: float) -> float:
        """Let ``seconds`` of bus time pass: end this participant's step
        there and wait until every participant is done. Periodic tasks send
        at their due times within it. The frames of the step are then waiting
        for ``recv``. Returns the new bus time in seconds."""
        try:
            self._native.finish_step_ahead()
            until = self.now_ns + int(round(seconds * 1e9))
            while True:
                now = self.now_ns
                upcoming = send_due(self._virtual_tasks, now)
                boundary = until if upcoming is None else min(upcoming, until)
                if boundary <= now:
                    return now / 1e9
                self._native.step(boundary)
                if boundary == until:
                    return until / 1e9
        except _native.Error as e:
            raise translate(e, opening=False) from None

    def step_ahead(
        self, seconds: float, period: float, wake_on: Optional[can.typechecking.CanFilters] = None
    ) -> float:
        """Let ``seconds`` of bus time pass in steps of ``period`` seconds, none
        of which needs this participant (a bus opened with ``synchronized=True,
        ahead=True``) unless a frame matching ``wake_on`` (python-can filters;
        None or empty: any frame) reaches one of its ports: then bus time stops
        at the first of its step boundaries at or after that frame (after it
        when the frame came at that very boundary, as a participant stepping
        every period would see it). One round trip for many steps. Returns
        the bus time reached, in seconds; the frames up to it wait for
        ``recv``. Periodic tasks (``send_periodic``) are timed by ``step``
        only: with one running this raises ``CanOperationError``.

        Ctrl-C (``KeyboardInterrupt``) stops the wait within about 50 ms but
        not the step: the hub runs bus time on to its end (or the wake-up) as
        if the call had gone on. The bus's next ``step`` or ``step_ahead``
        first waits for that grant, and counts its ``seconds`` from there; a
        frame sent before then goes on the bus at whatever bus time the hub
        stands at when it arrives (send after the next ``step`` to place it
        after the interrupted step)."""
        if self._virtual_tasks:
            raise can.CanOperationError(
                "step_ahead does not run send_periodic tasks: step with step(), or place the frames with send_at()"
            )
        period_ns = _bus_ns("period", period)
        try:
            self._native.finish_step_ahead()
            until = self.now_ns + _bus_ns("seconds", seconds)
            return self._native.step_ahead(until, period_ns, socketcan_filters(wake_on) or []) / 1e9
        except _native.Error as e:
            raise translate(e, opening=False) from None

    def _send_periodic_internal(self, msgs, period, duration=None, *more: Any, **named: Any):
        """On a synchronised bus a task timed in bus time; otherwise
        python-can's thread timed by the wall clock."""
        if not self._synchronized:
            return super()._send_periodic_internal(msgs, period, duration, *more, **named)
        # python-can 4.4 passes (modifier_callback), later versions
        # (autostart, modifier_callback): tell them apart by type.
        autostart, modifier = named.get("autostart", True), named.get("modifier_callback")
        for value in more:
            if isinstance(value, bool):
                autostart = value
            elif value is not None:
                modifier = value
        return VirtualPeriodicTask(self, msgs, period, duration, autostart, modifier)

    def fileno(self) -> int:
        try:
            return self._native.fileno()
        except _native.Error as e:
            raise translate(e, opening=False) from None

    @property
    def tx_queue_full(self) -> bool:
        """Whether more than 256 frames of this participant waited in the hub
        at its last step boundary (virtual time: its channel carries less than
        it sends). Meanwhile ``send(msg, timeout=0)`` raises naming
        ``queue_full``; a send without a timeout still queues its frame. Always
        false outside virtual time."""
        return self._native.tx_queue_full()

    @property
    def rx_dropped(self) -> int:
        """Frames the hub dropped for this bus because it was read too slowly."""
        return self._native.rx_dropped(self._port)

    @property
    def state(self) -> can.BusState:
        """``PASSIVE`` for a listen-only bus; otherwise the port's controller
        state as the hub keeps it (error-active: ``ACTIVE``, error-passive:
        ``PASSIVE``, bus-off: ``ERROR``)."""
        if self._listen_only:
            return can.BusState.PASSIVE
        try:
            state = self._native.port_state(self._port)
        except _native.Error as e:
            raise translate(e, opening=False) from None
        return {"active": can.BusState.ACTIVE, "passive": can.BusState.PASSIVE}.get(state, can.BusState.ERROR)

    @state.setter
    def state(self, new_state: can.BusState) -> None:
        """``PASSIVE``: listen-only; ``ACTIVE``: transmit and acknowledge.
        A change reopens the port (same name, options and filters): frames
        sent on the channel in that instant are not received, as when a
        SocketCAN interface is taken down to change its mode."""
        listen_only = _listen_only(new_state)
        if listen_only == self._listen_only:
            return
        try:
            self._native.close_port(self._port)
            self._listen_only = listen_only
            self._open_port()
            self._native.set_filters(self._port, socketcan_filters(self.filters))
        except _native.Error as e:
            raise translate(e, opening=False) from None

    def shutdown(self) -> None:
        # Periodic tasks stop first, so they do not meet the closed client;
        # one blocked mid-send gets can.CanOperationError.
        super().shutdown()
        if self._native is not None:
            self._native.close()

    @staticmethod
    def _detect_available_configs() -> List[can.typechecking.AutoDetectedConfig]:
        """The channels of the hub at ``$FIELDHUB_HUB`` and of the local hub
        (over shared memory when it serves it, else on the default TCP
        port); nothing when no hub answers."""
        from fieldhub.errors import FieldhubError
        from fieldhub.hub import Hub

        urls = []
        for url in (os.environ.get("FIELDHUB_HUB"), default_hub(), "tcp://127.0.0.1:29536"):
            if url and url not in urls:
                urls.append(url)
        configs: List[can.typechecking.AutoDetectedConfig] = []
        seen = set()
        for url in urls:
            try:
                hub = Hub.attach(url, token=os.environ.get("FIELDHUB_TOKEN"))
                channels = hub.channels()
                address = hub._control_address()
            except (FieldhubError, OSError):
                continue
            # The local hub may answer under two URLs (shm and tcp): list it once.
            if address in seen:
                continue
            seen.add(address)
            for channel in channels:
                configs.append(
                    {"interface": "fieldhub", "channel": channel["name"], "hub": url, "fd": channel["protocol"] == "canfd"}
                )
        return configs
