"""A hub to talk to: a private one this process starts, or a running one.

::

    with fieldhub.Hub() as hub:                      # private hub, free port
        bus = hub.bus("can0")                        # a python-can Bus on it
        hub.add_fault(channel="can0", at="bus", id=0x100, mask=0x7FF,
                      action={"type": "drop"}, probability=0.1, seed=42)
        hub.unplug("ecu1"); hub.cut("can0", ["dash"]); hub.stats()
        hub.rbs().set("EngineStatus", Rpm=2000)      # a rest-bus simulation

A private hub is a child process (``python -m fieldhub hub``, the Rust hub in
the extension) on a free loopback port, also serving shared memory under a
name private to it (:attr:`Hub.shm_url`), which :meth:`Hub.bus` uses; it ends with :meth:`Hub.stop`, the
``with`` block, or the process that started it, however that ends. Every
control method is one call of the hub's HTTP control API and returns its JSON
answer; a refusal raises :class:`fieldhub.HubError` with the hub's status and
message.
"""

import collections
import itertools
import json
import os
import select
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from typing import Any, Deque, Dict, Iterable, List, Optional, Union

import can

from fieldhub import _native
from fieldhub.errors import HubError, HubStartError, HubUnreachable
from fieldhub.rbs import RestBus, start as start_rest_bus

#: Numbers the private hubs of this process, for their shared-memory names.
_private_hubs = itertools.count()

#: How long a private hub may take to start.
START_TIMEOUT = 30.0
#: How many of a private hub's log lines are kept.
LOG_LINES = 1000
#: How long stopping waits at each step (pipe closed, SIGTERM) before the next.
STOP_TIMEOUT = 10.0


def _read_to_end(fd: int, timeout: float) -> Optional[str]:
    """Everything written to the pipe ``fd`` until its writer closes it
    (closing ``fd``), or None if that takes longer than ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    chunks: List[bytes] = []
    with os.fdopen(fd, "rb", buffering=0) as pipe:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([pipe], [], [], left)[0]:
                return None
            chunk = pipe.read(4096)
            if not chunk:
                return b"".join(chunks).decode()
            chunks.append(chunk)


class Hub:
    """A fieldhub hub and its control API."""

    def __init__(self, config: Optional[str] = None, *, url: Optional[str] = None, token: Optional[str] = None,
                 recordings_dir: Optional[str] = None, time: Optional[str] = None, tls_ca: Optional[str] = None,
                 tls_cert: Optional[str] = None, tls_key: Optional[str] = None):
        """Start a private hub (optionally with TOML ``config`` text), or
        attach to the running hub at ``url`` when one is given. A private
        hub writes recordings (:meth:`start_recording`) only inside
        ``recordings_dir`` (default: ``recordings`` in the working directory).
        ``time="virtual"`` runs a private hub in virtual time (replacing the
        configuration's ``[hub] time``): see :meth:`FieldhubBus.step`.
        ``tls_ca``, ``tls_cert``, ``tls_key``: for a hub whose TCP port speaks
        TLS (``tls://``, its control API ``https://``), the CA bundle to trust
        it with and the certificate to present; each defaults to its
        ``FIELDHUB_TLS_*`` variable."""
        self.token = token
        #: The TLS settings buses (:meth:`bus`) and control calls use.
        self.tls = {"tls_ca": tls_ca, "tls_cert": tls_cert, "tls_key": tls_key}
        self._time = time
        #: Where a private hub writes recordings; None: the hub's default.
        self.recordings_dir: Optional[str] = os.path.abspath(recordings_dir) if recordings_dir else None
        self._process: Optional[subprocess.Popen] = None
        self._config_file: Optional[str] = None
        self._log: Deque[str] = collections.deque(maxlen=LOG_LINES)
        #: ``shm://NAME`` of a private hub: local buses use shared memory.
        self.shm_url: Optional[str] = None
        if url is not None:
            self.url = url
        else:
            self.url = self._start(config)

    @classmethod
    def attach(cls, url: str, token: Optional[str] = None, **tls: Optional[str]) -> "Hub":
        """A running hub at ``url``: ``tcp://HOST:PORT``, ``tls://HOST:PORT``
        (with ``tls_ca=``, ``tls_cert=``, ``tls_key=`` as for :class:`Hub`), or
        ``shm://NAME`` for a local hub (its control API is found through the
        address it publishes next to its session socket)."""
        return cls(url=url, token=token, **tls)

    def _start(self, config: Optional[str]) -> str:
        shm_name = f"py-{os.getpid()}-{next(_private_hubs)}"
        command = [sys.executable, "-m", "fieldhub", "hub", "--listen", "127.0.0.1:0", "--until-stdin-closes"]
        command += ["--shm", shm_name]
        if config is not None:
            handle, self._config_file = tempfile.mkstemp(prefix="fieldhub-", suffix=".toml")
            with os.fdopen(handle, "w") as f:
                f.write(config)
            command += ["--config", self._config_file, "--config-origin", "Hub(config)"]
        if self.recordings_dir:
            command += ["--recordings-dir", self.recordings_dir]
        if self._time is not None:
            command += ["--time", self._time]
        # The hub writes its addresses to this pipe once it is ready (the log
        # is for people, and FIELDHUB_LOG may hide it). Only the hub holds
        # the write end, so a hub that dies first ends the pipe at once.
        ready_read, ready_write = os.pipe()
        command += ["--ready-fd", str(ready_write)]
        # The hub holds the read end of the stdin pipe: when this process
        # ends, in whatever way, the pipe closes and the hub stops itself. Its
        # own session keeps a terminal's Ctrl-C from stopping it under a
        # program that is still cleaning up.
        # The token travels in the environment, where other users cannot read
        # it (they can read a command line); this hub requires exactly the
        # token it was given, whatever this process's environment says.
        env = {k: v for k, v in os.environ.items() if k not in ("FIELDHUB_TOKEN", "FIELDHUB_TOKEN_FILE")}
        if self.token:
            env["FIELDHUB_TOKEN"] = self.token
        try:
            self._process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                pass_fds=(ready_write,), env=env,
            )
        except BaseException:
            os.close(ready_read)
            raise
        finally:
            os.close(ready_write)

        def read_log() -> None:
            for line in self._process.stderr:
                self._log.append(line.rstrip())

        log_reader = threading.Thread(target=read_log, name="fieldhub-hub-log", daemon=True)
        log_reader.start()
        line = _read_to_end(ready_read, START_TIMEOUT)
        if not line:
            # Stopped, the hub has closed its stderr: the log is complete.
            self.stop()
            log_reader.join(STOP_TIMEOUT)
            said = " | ".join(entry.removeprefix("error: ") for entry in list(self._log)[-5:]) or "nothing"
            if line is None:
                raise HubStartError(f"the private hub did not report ready within {START_TIMEOUT:.0f} s: {said}")
            raise HubStartError(f"the private hub did not start: {said}")
        ready = json.loads(line)
        self.shm_url = ready["shm"]
        scheme = "tls" if ready.get("tls") else "tcp"
        return f"{scheme}://{ready['tcp'][0]}"

    @property
    def pid(self) -> Optional[int]:
        """The process id of a private hub (None for an attached hub)."""
        return self._process.pid if self._process is not None else None

    @property
    def log(self) -> List[str]:
        """What a private hub printed lately (its last LOG_LINES lines)."""
        return list(self._log)

    def bus(self, channel: str = "can0", **kwargs: Any) -> can.BusABC:
        """A python-can bus on this hub (over shared memory for a private hub)."""
        kwargs.setdefault("token", self.token)
        for key, value in self.tls.items():
            if value is not None:
                kwargs.setdefault(key, value)
        return can.Bus(interface="fieldhub", channel=channel, hub=self.shm_url or self.url, **kwargs)

    def stop(self) -> None:
        """Stop a private hub and clean up: close its pipe (it stops itself),
        then SIGTERM, then SIGKILL, each with a bound. For an attached hub,
        nothing."""
        process, self._process = getattr(self, "_process", None), None
        if process is not None:
            if process.stdin is not None:
                try:
                    process.stdin.close()
                except OSError:
                    pass
            for give_up in (process.terminate, process.kill):
                try:
                    process.wait(STOP_TIMEOUT)
                    break
                except subprocess.TimeoutExpired:
                    give_up()
            process.wait()
            shm_url = getattr(self, "shm_url", None)
            if shm_url is not None:
                # A hub that was killed could not remove its session socket.
                try:
                    os.unlink(_native.shm_socket_path(shm_url[len("shm://") :]))
                except FileNotFoundError:
                    pass
        config_file, self._config_file = getattr(self, "_config_file", None), None
        if config_file is not None:
            try:
                os.unlink(config_file)
            except FileNotFoundError:
                pass

    def __enter__(self) -> "Hub":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __del__(self) -> None:
        self.stop()

    # --- the control API ---------------------------------------------------

    def request(self, method: str, path: str, body: Optional[Any] = None) -> Any:
        """One control API call; returns the decoded JSON answer."""
        address = self._control_address()
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(address + path, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        context = self._ssl_context() if address.startswith("https://") else None
        try:
            with urllib.request.urlopen(request, timeout=10, context=context) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as e:
            try:
                message = json.loads(e.read())["error"]
            except (ValueError, KeyError):
                message = e.reason
            raise HubError(e.code, message) from None
        except OSError as e:
            raise HubUnreachable(f"cannot reach the control API at {address}: {e}") from None

    def _control_address(self) -> str:
        """The control API's base URL: the hub's TCP address (the API is
        served on it), read from the hub's published file for ``shm://``."""
        url = self.url
        if url.startswith("shm://"):
            path = _native.shm_control_path(url[len("shm://"):].split("?", 1)[0])
            try:
                with open(path) as f:
                    url = f.read().strip()
            except OSError as e:
                raise HubUnreachable(
                    f"the hub serving {self.url} publishes no control address ({e}); "
                    "it serves the control API only on a TCP listener: attach to tcp://HOST:PORT"
                ) from None
        if url.startswith("tls://"):
            return url.replace("tls://", "https://", 1)
        if not url.startswith("tcp://"):
            raise HubUnreachable(
                f"the control API is reached through tcp://HOST:PORT, tls://HOST:PORT or shm://NAME, not {url}"
            )
        return url.replace("tcp://", "http://", 1)

    def _ssl_context(self) -> ssl.SSLContext:
        """HTTPS to a TLS hub: its CA (else the system's) and, for mutual
        TLS, this process's certificate, as the buses take them."""
        def setting(key: str) -> Optional[str]:
            value = self.tls[key] or os.environ.get("FIELDHUB_" + key.upper()) or None
            return None if value is None else os.fspath(value)

        try:
            context = ssl.create_default_context(cafile=setting("tls_ca"))
            if setting("tls_cert"):
                context.load_cert_chain(setting("tls_cert"), setting("tls_key"))
        except (OSError, ssl.SSLError) as e:
            raise HubUnreachable(f"TLS settings for the control API (FIELDHUB_TLS_CA, _CERT, _KEY): {e}") from None
        return context

    def stats(self) -> Dict[str, Any]:
        return self.request("GET", "/api/v1/stats")

    def channels(self) -> List[Dict[str, Any]]:
        return self.request("GET", "/api/v1/channels")

    def ports(self) -> List[Dict[str, Any]]:
        return self.request("GET", "/api/v1/ports")

    def clients(self) -> List[Dict[str, Any]]:
        return self.request("GET", "/api/v1/clients")

    def port(self, name: str) -> Dict[str, Any]:
        """One port's state and counters."""
        for port in self.ports():
            if port["name"] == name:
                return port
        raise HubError(404, f"no open port named '{name}'")

    def plug(self, port: str, channel: str) -> Dict[str, Any]:
        return self.request("POST", f"/api/v1/ports/{port}/plug", {"channel": channel})

    def unplug(self, port: str) -> Dict[str, Any]:
        return self.request("POST", f"/api/v1/ports/{port}/unplug")

    def cut(self, channel: str, ports: List[str]) -> Dict[str, Any]:
        return self.request("POST", f"/api/v1/channels/{channel}/cut", {"ports": ports})

    def repair(self, channel: str) -> Dict[str, Any]:
        return self.request("POST", f"/api/v1/channels/{channel}/repair")

    def short(self, channel: str) -> Dict[str, Any]:
        return self.request("POST", f"/api/v1/channels/{channel}/short")

    def unshort(self, channel: str) -> Dict[str, Any]:
        return self.request("POST", f"/api/v1/channels/{channel}/unshort")

    def lin_sleep(self, channel: str) -> Dict[str, Any]:
        """The LIN channel's master sends the go-to-sleep command at its next slot boundary
        (``fieldhub ctl lin sleep``); the channel sleeps from the command's end."""
        return self.request("POST", f"/api/v1/channels/{channel}/lin/sleep")

    def lin_wake(self, channel: str) -> Dict[str, Any]:
        """The master wakes the sleeping LIN channel with its wake-up pulse (``fieldhub ctl lin wake``)."""
        return self.request("POST", f"/api/v1/channels/{channel}/lin/wake")

    def force_state(self, port: str, state: str) -> Dict[str, Any]:
        """``state``: ``error_active``, ``error_passive`` or ``bus_off``."""
        return self.request("POST", f"/api/v1/ports/{port}/state", {"state": state})

    def bridge(self, from_channel: str, to_channel: str, **route: Any) -> Dict[str, Any]:
        """A gateway route; ``route`` takes ``id``, ``mask``, ``extended``,
        ``rewrite_id``, ``hop_limit``."""
        return self.request("POST", "/api/v1/routes", {"from": from_channel, "to": to_channel, **route})

    def unbridge(self, route: int) -> Dict[str, Any]:
        """Remove the route numbered ``route`` (the ``route`` of ``bridge``'s answer)."""
        return self.request("DELETE", f"/api/v1/routes/{route}")

    def gateways(self) -> List[Dict[str, Any]]:
        """The CAN↔LIN gateways with their counters (``fieldhub ctl gateways``)."""
        return self.request("GET", "/api/v1/gateways")

    def add_gateway(
        self, from_channel: str, to_channel: str, can_id: int, lin_id: int, *, extended: bool = False,
        node: Optional[str] = None,
    ) -> Dict[str, Any]:
        """A CAN↔LIN gateway, as a ``[[gateway]]`` table (docs/buses.md): one
        frame mapped from ``from_channel`` to ``to_channel``. Returns it as
        ``gateways()`` lists it, its number in ``gateway``; a table the
        configuration would refuse raises ``HubError`` naming the key."""
        gateway = {"from": from_channel, "to": to_channel, "can_id": can_id, "lin_id": lin_id, "extended": extended}
        if node is not None:
            gateway["node"] = node
        return self.request("POST", "/api/v1/gateways", gateway)

    def remove_gateway(self, gateway: int) -> Dict[str, Any]:
        """Remove gateway number ``gateway``; returns its last counters
        (``dropped``: frames it had queued and did not send)."""
        return self.request("DELETE", f"/api/v1/gateways/{gateway}")

    def add_fault(self, **rule: Any) -> Dict[str, Any]:
        """A fault rule (see docs/control.md): ``channel``, ``at``, ``action``, …"""
        return self.request("POST", "/api/v1/faults", rule)

    def faults(self) -> List[Dict[str, Any]]:
        return self.request("GET", "/api/v1/faults")

    def remove_fault(self, rule_id: int) -> Dict[str, Any]:
        return self.request("DELETE", f"/api/v1/faults/{rule_id}")

    def start_recording(self, path: str, channels: Optional[List[str]] = None) -> Dict[str, Any]:
        """Have the hub record ``channels`` (all when none) to ``path``,
        relative to its recordings directory (see docs/recording.md)."""
        return self.request("POST", "/api/v1/recordings", {"path": path, "channels": channels or []})

    def stop_recording(self, recording_id: int) -> Dict[str, Any]:
        return self.request("DELETE", f"/api/v1/recordings/{recording_id}")

    def create_channel(self, name: str, **config: Any) -> Dict[str, Any]:
        return self.request("POST", "/api/v1/channels", {"name": name, **config})

    def update_channel(self, name: str, **changes: Any) -> Dict[str, Any]:
        return self.request("PATCH", f"/api/v1/channels/{name}", changes)

    def remove_channel(self, name: str) -> Dict[str, Any]:
        return self.request("DELETE", f"/api/v1/channels/{name}")

    def time(self) -> Dict[str, Any]:
        """Bus time (``now_ns``); in virtual time also the participants,
        the hold on time and the real-time factor."""
        return self.request("GET", "/api/v1/time")

    def pause(self) -> Dict[str, Any]:
        """Hold virtual time where it is."""
        return self.request("POST", "/api/v1/time", {"action": "pause"})

    def resume(self) -> Dict[str, Any]:
        """Let virtual time run as far as the participants go."""
        return self.request("POST", "/api/v1/time", {"action": "resume"})

    def single_step(self) -> Dict[str, Any]:
        """Advance virtual time once, then hold it."""
        return self.request("POST", "/api/v1/time", {"action": "step"})

    def run_until(self, seconds: float) -> Dict[str, Any]:
        """Let virtual time run up to ``seconds`` of bus time, then hold it."""
        return self.request("POST", "/api/v1/time", {"action": "run_until", "until_ns": int(round(seconds * 1e9))})

    def rbs(self, sim: int = 0) -> RestBus:
        """The hub's rest-bus simulation ``sim`` (its ``[[rbs]]`` tables from
        0, then those started later), to set, ramp, stop and start its
        messages' signals by name (docs/rest-bus.md)."""
        return RestBus(self, sim)

    def start_rbs(self, dbc: Union[str, "os.PathLike[str]"], channel: str = "can0", *,
                  nodes: Optional[Iterable[str]] = None, exclude: Optional[Iterable[str]] = None,
                  default_cycle_ms: Optional[int] = None, counters: Iterable[Dict[str, Any]] = (),
                  checksums: Iterable[Dict[str, Any]] = ()) -> RestBus:
        """Start a rest-bus simulation of the DBC file ``dbc`` on ``channel``,
        as an ``[[rbs]]`` table would: only ``nodes``, or every node but
        ``exclude``; ``counters`` and ``checksums`` as ``[[rbs.counter]]`` and
        ``[[rbs.checksum]]`` tables (dicts of the same keys). Used as a
        ``with`` block, it is removed at its end (else :meth:`RestBus.remove`)."""
        return start_rest_bus(self, dbc, channel, nodes, exclude, default_cycle_ms, counters, checksums)
