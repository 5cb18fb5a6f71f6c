"""A hub's rest-bus simulation (docs/rest-bus.md), by message and signal name.

::

    sim = hub.rbs()                                  # the hub's [[rbs]] table 0
    sim.set("EngineStatus", Rpm=2000)                # from the message's next cycle
    sim.ramp("EngineStatus", 2.0, Rpm=3000)          # over 2 s of bus time
    sim.stop("BodyMux"); sim.start("BodyMux")           # a message
    sim.stop_node("BODY"); sim.start_node("BODY")        # every message of a node
    sim.stick_counter("EngineStatus"); sim.corrupt_checksum("EngineStatus")

    with hub.start_rbs("body.dbc", channel="can0", exclude=["DUT"]) as sim:
        ...                                          # removed at the end

The simulation runs in the hub, on bus time; each method is one call of the
control API (``/api/v1/rbs``) and returns its JSON answer. A value the hub
refuses (outside the signal's range, an unknown name) raises
:class:`fieldhub.HubError` naming it, and changes nothing.
"""

import os
from typing import Any, Dict, Iterable, List, Optional, Union

from fieldhub.errors import HubError


class RestBus:
    """One rest-bus simulation of a hub: :meth:`fieldhub.Hub.rbs` or
    :meth:`fieldhub.Hub.start_rbs`."""

    def __init__(self, hub: Any, sim: int = 0, *, owned: bool = False):
        self.hub = hub
        #: Its number (``sim`` in the control API).
        self.sim = sim
        self._owned = owned

    def __enter__(self) -> "RestBus":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._owned:
            self.remove()

    def info(self) -> Dict[str, Any]:
        """The simulation as the hub lists it: channel, dbc, messages."""
        for sim in self.hub.request("GET", "/api/v1/rbs"):
            if sim["sim"] == self.sim:
                return sim
        raise HubError(404, f"no rest-bus simulation {self.sim} runs")

    def messages(self) -> List[Dict[str, Any]]:
        """Every simulated message: name, node, id, cycle_ms, enabled, sent,
        counter_stuck, checksum_wrong, signals (name: value) and ramps."""
        return self.info()["messages"]

    def message(self, name: str) -> Dict[str, Any]:
        for message in self.messages():
            if message["name"] == name:
                return message
        raise HubError(404, f"simulation {self.sim} sends no message '{name}'")

    def get(self, message: str, signal: str) -> float:
        """A signal's physical value: as set, or (an alive counter, a
        checksum, a ramped signal) as last sent."""
        return self.message(message)["signals"][signal]

    def _change(self, message: str, **change: Any) -> Dict[str, Any]:
        return self.hub.request("POST", "/api/v1/rbs", {"sim": self.sim, "message": message, **change})

    def set(self, message: str, **values: float) -> Dict[str, Any]:
        """Set signals to physical values (factor and offset applied), sent
        from the message's next cycle on; ends a ramp of them."""
        return self._change(message, set=values)

    def ramp(self, message: str, seconds: float, **targets: float) -> Dict[str, Any]:
        """Ramp signals linearly, over ``seconds`` of bus time, from the
        value each has at the message's next cycle to its target; every
        cycle sends the ramp's value at its bus time, the target from the
        end on."""
        ms = seconds * 1000.0
        return self._change(message, ramp={name: {"to": to, "ms": ms} for name, to in targets.items()})

    def stop(self, message: str) -> Dict[str, Any]:
        """Stop sending ``message``."""
        return self._change(message, enabled=False)

    def start(self, message: str) -> Dict[str, Any]:
        """Send a stopped ``message`` again."""
        return self._change(message, enabled=True)

    def stop_node(self, node: str) -> Dict[str, Any]:
        """Stop every message of the simulated ``node``."""
        return self.hub.request("POST", "/api/v1/rbs", {"sim": self.sim, "node": node, "enabled": False})

    def start_node(self, node: str) -> Dict[str, Any]:
        """Send every message of the simulated ``node`` again."""
        return self.hub.request("POST", "/api/v1/rbs", {"sim": self.sim, "node": node, "enabled": True})

    def stick_counter(self, message: str, stuck: bool = True) -> Dict[str, Any]:
        """Make the alive counter repeat its value (``False``: count again)."""
        return self._change(message, counter_stuck=stuck)

    def corrupt_checksum(self, message: str, wrong: bool = True) -> Dict[str, Any]:
        """Send the checksum inverted (``False``: right again)."""
        return self._change(message, checksum_wrong=wrong)

    def remove(self) -> Dict[str, Any]:
        """Stop the whole simulation: its nodes leave the channel."""
        self._owned = False
        return self.hub.request("DELETE", f"/api/v1/rbs/sims/{self.sim}")


def start(hub: Any, dbc: Union[str, "os.PathLike[str]"], channel: str, nodes: Optional[Iterable[str]],
          exclude: Optional[Iterable[str]], default_cycle_ms: Optional[int],
          counters: Iterable[Dict[str, Any]], checksums: Iterable[Dict[str, Any]]) -> RestBus:
    """:meth:`fieldhub.Hub.start_rbs`."""
    with open(dbc, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        # What Vector's tools write; the hub reads the text as given.
        text = data.decode("cp1252", errors="replace")
    body: Dict[str, Any] = {"name": os.path.basename(os.fspath(dbc)), "dbc": text, "channel": channel,
                            "counter": list(counters), "checksum": list(checksums)}
    if nodes is not None:
        body["nodes"] = list(nodes)
    if exclude is not None:
        body["except"] = list(exclude)
    if default_cycle_ms is not None:
        body["default_cycle_ms"] = default_cycle_ms
    answer = hub.request("POST", "/api/v1/rbs/sims", body)
    return RestBus(hub, answer["sim"], owned=True)
