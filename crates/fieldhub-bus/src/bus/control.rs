//! Control requests applied by the bus thread, between two frames.

use std::path::PathBuf;

use serde_json::{json, Value};

use super::{Bus, Route};
use crate::channel::Channel;
use crate::config::{Arbitration, ChannelConfig, Protocol, RouteConfig, MAX_CHANNELS, MAX_ROUTES};
use crate::fault::{FaultRule, FaultSpec};
use crate::lin_gateway::GatewayConfig;
use crate::member::Member;
use crate::outbox::Outbound;
use crate::port_id::PortId;
use crate::recording::{Recording, RecordingFormat, RecordingStart, RecordingState, FINISHED_KEPT, MAX_RECORDINGS};
use crate::request::{ChannelUpdate, ControlError, ControlRequest, ControlResult, ForcedState, RecordingSpec};
use fieldhub_proto::fate::DropReason;

/// Most fault rules one channel carries.
const MAX_FAULTS: usize = 256;

fn recording_json(r: &Recording) -> Value {
    let state = r.state();
    let mut answer = json!({
        "id": r.id,
        "path": r.path,
        "name": r.name,
        "format": r.format.name(),
        "channels": r.channels.iter().map(|(_, name)| name).collect::<Vec<_>>(),
        "state": state.name(),
        "dropped": r.dropped(),
        "error": r.failure(),
    });
    match state {
        RecordingState::Stopped { frames } => answer["frames"] = json!(frames),
        RecordingState::Failed { error } => answer["error"] = json!(error),
        RecordingState::Recording | RecordingState::Stopping => {}
    }
    answer
}

fn fault_json(channel: &str, rule: &FaultRule) -> Value {
    json!({
        "id": rule.id,
        "channel": channel,
        "rule": rule.spec,
        "matched": rule.matched,
        "applied": rule.applied,
    })
}

impl Bus {
    /// Apply one control request.
    pub(crate) fn apply(&mut self, request: ControlRequest) -> ControlResult {
        // The page polls while it is open, so closed monitors go soon.
        self.close_monitors();
        match request {
            ControlRequest::Stats => {
                serde_json::to_value(self.stats()).map_err(|e| ControlError::Invalid(e.to_string()))
            }
            ControlRequest::Channels => Ok(self.channels_json()),
            ControlRequest::Ports => Ok(Value::Array(self.ports_json())),
            ControlRequest::Routes => Ok(Value::Array(self.routes.iter().map(|r| self.route_json(r)).collect())),
            ControlRequest::Gateways => Ok(self.gateways.json(&self.channels)),
            ControlRequest::AddGateway(config) => self.add_gateway(config),
            ControlRequest::RemoveGateway { id } => self.gateways.remove(id, &mut self.channels),
            ControlRequest::Plug { port, channel } => self.plug(&port, &channel),
            ControlRequest::Unplug { port } => self.unplug(&port),
            ControlRequest::Cut { channel, ports } => self.cut(&channel, &ports),
            ControlRequest::Repair { channel } => self.repair(&channel),
            ControlRequest::AddRoute(spec) => self.add_route(spec),
            ControlRequest::RemoveRoute { id } => self.remove_route(id),
            ControlRequest::Faults => Ok(Value::Array(
                self.channels.iter().flat_map(|c| c.rules.iter().map(move |r| fault_json(c.name(), r))).collect(),
            )),
            ControlRequest::AddFault(spec) => self.add_fault(spec),
            ControlRequest::RemoveFault { id } => self.remove_fault(id),
            ControlRequest::ForceState { port, state } => self.force_state(&port, state),
            ControlRequest::Short { channel } => self.set_short(&channel, true),
            ControlRequest::Unshort { channel } => self.set_short(&channel, false),
            ControlRequest::LinPower { channel, sleep } => self.lin_power(&channel, sleep),
            ControlRequest::Clients => Ok(self.clients_json()),
            ControlRequest::CreateChannel(config) => self.create_channel(*config),
            ControlRequest::RemoveChannel { channel } => self.remove_channel(&channel),
            ControlRequest::UpdateChannel { channel, update } => self.update_channel(&channel, update),
            ControlRequest::Recordings => Ok(Value::Array(self.recordings.iter().map(recording_json).collect())),
            ControlRequest::StartRecording { spec, file } => self.start_recording(spec, file),
            ControlRequest::StopRecording { id } => self.stop_recording(id),
            ControlRequest::Monitor { channels, tap } => self.open_monitor(&channels, tap),
            ControlRequest::PortNames { ids } => Ok(self.port_names_json(&ids)),
            ControlRequest::Send { channel, frame } => self.send_frame(&channel, frame),
            ControlRequest::Time => Ok(self.time_json()),
            ControlRequest::SetTime(command) => self.set_time(command),
        }
    }

    pub(super) fn channel_index(&self, name: &str) -> Result<u16, ControlError> {
        self.channel_ids.get(name).copied().ok_or_else(|| {
            let mut known: Vec<&str> = self.channel_ids.keys().map(String::as_str).collect();
            known.sort_unstable();
            ControlError::NotFound(format!("no channel named '{name}' (channels: {})", known.join(", ")))
        })
    }

    /// (channel index, position in its member list) of the open port `name`.
    fn find_port(&self, name: &str) -> Result<(usize, usize), ControlError> {
        let port_id = self
            .port_names
            .iter()
            .find(|(_, n)| n.as_str() == name)
            .map(|(&id, _)| id)
            .ok_or_else(|| ControlError::NotFound(format!("no open port named '{name}'")))?;
        self.channels
            .iter()
            .enumerate()
            .find_map(|(c, channel)| channel.members.find(|m| m.port_id == port_id).map(|m| (c, m)))
            .ok_or_else(|| ControlError::NotFound(format!("port '{name}' is not attached to any channel")))
    }

    fn port_json(&self, channel: usize, member: &Member) -> Value {
        json!({
            "name": self.port_names.get(&member.port_id),
            "port_id": member.port_id,
            "client": member.client,
            "channel": self.channels[channel].name(),
            "plugged": member.plugged,
            "segment": member.segment,
            "fd": member.takes_fd(),
            "listen_only": member.listen_only,
            "transmit_only": member.transmit_only,
            "read_only": member.read_only,
            "access": self.clients.get(&member.client).and_then(|c| c.access.grant_name()),
            "tx_frames": member.counters.tx_frames,
            "rx_frames": member.counters.rx_frames,
            "rx_dropped": member.counters.rx_dropped,
            "tx_dropped": member.counters.tx_dropped,
            "tx_dropped_by_reason": DropReason::counts_by_name(member.counters.tx_dropped_by_reason),
            "tx_refused": member.counters.tx_refused,
            "tx_pending": member.tx.len(),
            "error_state": member.errors.state(),
            "tec": member.errors.tec,
            "rec": member.errors.rec,
        })
    }

    fn ports_json(&self) -> Vec<Value> {
        let mut ports: Vec<(PortId, Value)> = self
            .channels
            .iter()
            .enumerate()
            .flat_map(|(c, channel)| {
                channel.members.iter().filter(|m| m.is_client()).map(move |m| (m.port_id, self.port_json(c, m)))
            })
            .collect();
        ports.sort_by_key(|(id, _)| *id);
        ports.into_iter().map(|(_, v)| v).collect()
    }

    fn channels_json(&self) -> Value {
        Value::Array(self.channels.iter().filter(|c| !c.removed).map(|c| self.channel_json(c.id as usize)).collect())
    }

    fn clients_json(&self) -> Value {
        let mut clients: Vec<(u32, Value)> = self
            .clients
            .iter()
            .map(|(&id, client)| {
                let ports: Vec<&String> =
                    client.ports.iter().flatten().filter_map(|owned| self.port_names.get(&owned.port_id)).collect();
                (id, json!({ "id": id, "name": client.name, "access": client.access.grant_name(), "ports": ports }))
            })
            .collect();
        clients.sort_by_key(|(id, _)| *id);
        Value::Array(clients.into_iter().map(|(_, v)| v).collect())
    }

    fn create_channel(&mut self, config: ChannelConfig) -> ControlResult {
        // Also checked before the request was sent; any caller may send one.
        crate::request::check_new_channel(&config)?;
        if self.channel_ids.contains_key(&config.name) {
            return Err(ControlError::Conflict(format!("channel '{}' exists already", config.name)));
        }
        if self.channels.iter().filter(|c| !c.removed).count() >= MAX_CHANNELS {
            return Err(ControlError::Conflict(format!("a hub carries at most {MAX_CHANNELS} channels")));
        }
        // A removed channel's slot is free: it has no ports and no routes,
        // so no client or route still names its id.
        let id = match self.channels.iter().position(|c| c.removed) {
            Some(free) => {
                self.channels[free] = Channel::new(free as u16, config);
                self.dirty[free] = false;
                self.deadlines[free] = None;
                free as u16
            }
            None => {
                let id = self.channels.len() as u16;
                self.channels.push(Channel::new(id, config));
                self.dirty.push(false);
                self.deadlines.push(None);
                self.relays.push(None);
                self.federation.push(None);
                id
            }
        };
        self.channel_ids.insert(self.channels[id as usize].name().to_owned(), id);
        Ok(self.channel_json(id as usize))
    }

    fn remove_channel(&mut self, name: &str) -> ControlResult {
        let index = self.channel_index(name)? as usize;
        // Its federation threads serve it for the hub's lifetime; the
        // freed slot would be reused by a channel that is not federated.
        if self.federation[index].is_some() {
            return Err(ControlError::Conflict(format!(
                "channel '{name}' is federated; federated channels come from the configuration"
            )));
        }
        let ports = self.channels[index].members.iter().filter(|m| m.is_client()).count();
        if ports > 0 {
            return Err(ControlError::Conflict(format!(
                "channel '{name}' still has {ports} port(s); close or move them first"
            )));
        }
        if self.routes.iter().any(|r| r.from as usize == index || r.to as usize == index) {
            return Err(ControlError::Conflict(format!("routes use channel '{name}'; remove them first")));
        }
        if self.gateways.use_channel(index) {
            let text = format!(
                "gateways use channel '{name}'; remove them first (`fieldhub ctl gateways` lists them, \
                 `fieldhub ctl gateway remove N` removes one)"
            );
            return Err(ControlError::Conflict(text));
        }
        let answer = self.channel_json(index);
        self.channel_ids.remove(name);
        let channel = &mut self.channels[index];
        channel.removed = true;
        channel.rules.clear();
        self.recordings.iter_mut().for_each(|r| r.channels.retain(|(id, _)| *id as usize != index));
        Ok(answer)
    }

    fn update_channel(&mut self, name: &str, update: ChannelUpdate) -> ControlResult {
        let index = self.channel_index(name)? as usize;
        let mut config = self.channels[index].config.clone();
        if let Some(bitrate) = update.bitrate {
            config.bitrate = bitrate;
        }
        if let Some(rate) = update.data_bitrate {
            config.data_bitrate = Some(rate);
        }
        config.check_rates().map_err(|(key, m)| ControlError::Invalid(format!("{key}: {m}")))?;
        let old = &self.channels[index].config;
        let slower = config.bitrate < old.bitrate || config.effective_data_bitrate() < old.effective_data_bitrate();
        if slower && old.arbitration != Arbitration::Can {
            // Its queued frames were accepted as fitting their turns at the old rates.
            return Err(ControlError::Invalid(format!(
                "bitrate: channel '{name}' has arbitration = \"{}\"; its bitrates may rise, not fall",
                old.arbitration.name()
            )));
        }
        let now_ns = self.clock.now();
        let channel = &mut self.channels[index];
        channel.config.bitrate = config.bitrate;
        channel.config.data_bitrate = config.data_bitrate;
        if let Some(timing) = update.timing {
            channel.set_timing(timing, now_ns, &mut self.sent);
        }
        self.dirty[index] = true;
        Ok(self.channel_json(index))
    }

    fn channel_json(&self, index: usize) -> Value {
        let c = &self.channels[index];
        let ports: Vec<&String> =
            c.members.iter().filter(|m| m.is_client()).filter_map(|m| self.port_names.get(&m.port_id)).collect();
        let cut: Vec<&String> = c
            .members
            .iter()
            .filter(|m| m.is_client() && m.segment != 0)
            .filter_map(|m| self.port_names.get(&m.port_id))
            .collect();
        json!({
            "name": c.name(),
            "protocol": c.config.protocol,
            "bitrate": c.config.bitrate,
            "data_bitrate": c.config.effective_data_bitrate(),
            "xl_data_bitrate": (c.config.protocol == Protocol::Canxl).then(|| c.config.effective_xl_data_bitrate()),
            "raw": (c.config.protocol == Protocol::Raw).then(|| c.config.rates().raw).map(|raw| {
                json!({ "bits_per_byte": raw.bits_per_byte, "overhead_bits": raw.overhead_bits })
            }),
            "timing": c.config.timing,
            "arbitration": c.config.arbitration,
            "tdma": c.config.tdma,
            "token": c.config.token,
            "master_slave": c.config.master_slave,
            "lin": c.config.lin,
            "no_responses": c.lin_no_responses(),
            "collisions": c.lin_collisions(),
            "lin_state": c.lin_power().map(|p| p.state),
            "sleeps": c.lin_power().map(|p| p.sleeps),
            "wake_ups": c.lin_power().map(|p| p.wake_ups),
            "frames": c.frames,
            "ports": ports,
            "cut": !cut.is_empty(),
            "cut_off_ports": cut,
            "shorted": c.shorted,
            "faults": c.rules.len(),
            // The lossless port whose full queue holds the channel, if any.
            "held_by": c.held_by.and_then(|id| self.port_names.get(&id)),
        })
    }

    fn route_json(&self, r: &Route) -> Value {
        let dropped = self.channels[r.to as usize]
            .members
            .iter()
            .find(|m| m.port_id == r.port_id)
            .map_or(0, |m| m.counters.tx_dropped);
        // The fields of the route as it was added (`id` and `mask` select
        // the identifiers routed, as in the configuration), and `route`: the
        // number that names it.
        json!({
            "route": r.id,
            "from": r.config.from,
            "to": r.config.to,
            "id": r.config.id,
            "mask": r.config.mask,
            "extended": r.config.extended,
            "rewrite_id": r.config.rewrite_id,
            "hop_limit": r.config.hop_limit,
            "routed": r.routed,
            "dropped": dropped,
        })
    }

    fn plug(&mut self, port: &str, channel: &str) -> ControlResult {
        let target = self.channel_index(channel)? as usize;
        let (current, at) = self.find_port(port)?;
        if current != target {
            // What waits for the old bus never reaches the new one.
            self.channels[current].lose_unsent(at);
            let Some(mut member) = self.channels[current].members.remove(at) else {
                return Err(ControlError::NotFound(format!("port '{port}' is not attached to any channel")));
            };
            member.segment = 0;
            member.plugged = true;
            let (client_id, handle, port_id) = (member.client, member.port, member.port_id.into());
            let member_port_id = member.port_id;
            let slot = self.channels[target].members.push(member);
            self.channels[target].name_port(member_port_id, port);
            if let Some(client) = self.clients.get_mut(&client_id) {
                if let Some(owned) = client.ports[handle as usize].as_mut() {
                    owned.channel = target as u16;
                    owned.member = slot;
                }
            }
            // Request 0: not an answer but the news that the port moved.
            let channel_flags = self.channels[target].flags();
            let moved =
                Outbound::PortOpened { request: 0, port: handle, channel_id: target as u16, port_id, channel_flags };
            self.reply(client_id, moved);
        } else {
            self.channels[current].members[at].plugged = true;
        }
        let (c, at) = self.find_port(port)?;
        Ok(self.port_json(c, &self.channels[c].members[at]))
    }

    fn unplug(&mut self, port: &str) -> ControlResult {
        let (c, at) = self.find_port(port)?;
        let member = &mut self.channels[c].members[at];
        if !member.plugged {
            return Err(ControlError::Conflict(format!("port '{port}' is already unplugged")));
        }
        member.plugged = false;
        self.channels[c].lose_unsent(at);
        Ok(self.port_json(c, &self.channels[c].members[at]))
    }

    fn cut(&mut self, channel: &str, ports: &[String]) -> ControlResult {
        let index = self.channel_index(channel)? as usize;
        if ports.is_empty() {
            return Err(ControlError::Invalid("name at least one port to cut off".into()));
        }
        if self.channels[index].members.iter().any(|m| m.segment != 0) {
            return Err(ControlError::Conflict(format!("channel '{channel}' is already cut; repair it first")));
        }
        let mut ids = Vec::with_capacity(ports.len());
        for port in ports {
            let (c, at) = self.find_port(port)?;
            if c != index {
                return Err(ControlError::Invalid(format!(
                    "port '{port}' is on channel '{}'",
                    self.channels[c].name()
                )));
            }
            ids.push(self.channels[c].members[at].port_id);
        }
        for member in self.channels[index].members.iter_mut().filter(|m| ids.contains(&m.port_id)) {
            member.segment = 1;
        }
        Ok(self.channel_json(index))
    }

    fn repair(&mut self, channel: &str) -> ControlResult {
        let index = self.channel_index(channel)? as usize;
        let members = &mut self.channels[index].members;
        if members.iter().all(|m| m.segment == 0) {
            return Err(ControlError::Conflict(format!("channel '{channel}' is not cut")));
        }
        members.iter_mut().for_each(|m| m.segment = 0);
        Ok(self.channel_json(index))
    }

    fn add_route(&mut self, spec: RouteConfig) -> ControlResult {
        crate::request::check_route(&spec)?;
        let from = self.channel_index(&spec.from)?;
        let to = self.channel_index(&spec.to)?;
        crate::channel::check_route_into(&self.channels[to as usize].config).map_err(ControlError::Invalid)?;
        if self.routes.len() >= MAX_ROUTES {
            return Err(ControlError::Conflict(format!("the hub carries at most {MAX_ROUTES} routes")));
        }
        let id = self.next_route_id;
        self.next_route_id = self.next_route_id.wrapping_add(1);
        // Gateway slots are the first MAX_ROUTES, reused as routes go.
        let port_id = (0..MAX_ROUTES as u16)
            .map(PortId::gateway)
            .find(|p| !self.routes.iter().any(|r| r.port_id == *p))
            .ok_or_else(|| ControlError::Conflict(format!("a hub carries at most {MAX_ROUTES} routes")))?;
        let route = Route { id, from, to, config: spec, port_id, routed: 0 };
        self.channels[to as usize].members.push(Member::gateway(route.port_id));
        let answer = self.route_json(&route);
        self.routes.push(route);
        Ok(answer)
    }

    /// A `[[gateway]]` table added at run time: the configuration's checks,
    /// each refusal naming its key.
    fn add_gateway(&mut self, config: GatewayConfig) -> ControlResult {
        let named = |key: &str, e: ControlError| match e {
            ControlError::NotFound(why) => ControlError::NotFound(format!("{key}: {why}")),
            other => other,
        };
        let from = self.channel_index(&config.from).map_err(|e| named("from", e))?;
        let to = self.channel_index(&config.to).map_err(|e| named("to", e))?;
        for (key, index) in [("from", from), ("to", to)] {
            if self.federation[index as usize].is_some() {
                let name = self.channels[index as usize].name();
                return Err(ControlError::Invalid(format!(
                    "{key}: channel '{name}' is federated; a gateway joins channels of this hub only"
                )));
            }
        }
        let id = self.gateways.add(config, from, to, &mut self.channels).map_err(|(key, why)| match key {
            "gateway" => ControlError::Conflict(why),
            _ => ControlError::Invalid(format!("{key}: {why}")),
        })?;
        Ok(self.gateways.one_json(id, &self.channels))
    }

    fn add_fault(&mut self, spec: FaultSpec) -> ControlResult {
        let index = self.channel_index(&spec.channel)? as usize;
        if self.channels[index].rules.len() >= MAX_FAULTS {
            return Err(ControlError::Conflict(format!("a channel carries at most {MAX_FAULTS} fault rules")));
        }
        let names = &self.port_names;
        let port = |name: &str| names.iter().find(|(_, n)| n.as_str() == name).map(|(&id, _)| id);
        let mut rule =
            FaultRule::compile(self.next_fault_id, &spec, self.clock.now(), port).map_err(ControlError::Invalid)?;
        rule.spec = serde_json::to_value(&spec).unwrap_or(Value::Null);
        self.next_fault_id += 1;
        let answer = fault_json(&spec.channel, &rule);
        self.channels[index].rules.push(rule);
        Ok(answer)
    }

    fn remove_fault(&mut self, id: u32) -> ControlResult {
        for channel in &mut self.channels {
            if let Some(at) = channel.rules.iter().position(|r| r.id == id) {
                let rule = channel.rules.remove(at);
                return Ok(fault_json(channel.name(), &rule));
            }
        }
        Err(ControlError::NotFound(format!("no fault rule with id {id}")))
    }

    fn force_state(&mut self, port: &str, state: ForcedState) -> ControlResult {
        let (c, at) = self.find_port(port)?;
        let now_ns = self.clock.now();
        let (bitrate, auto) = (self.channels[c].config.bitrate, self.channels[c].config.auto_bus_off_recovery);
        let before = self.channels[c].members[at].errors.state();
        let member = &mut self.channels[c].members[at];
        match state {
            ForcedState::ErrorActive => member.errors.recover(),
            ForcedState::ErrorPassive => {
                member.errors.recover();
                member.errors.tec = 128;
            }
            ForcedState::BusOff => {
                member.errors.tec = 248;
                member.errors.transmit_error(now_ns, bitrate, auto);
                member.discard_pending(DropReason::BusOff);
            }
        }
        self.channels[c].report_state_change(at, before, now_ns);
        // A forced state may end (bus-off recovery): let the channel plan for it.
        self.dirty[c] = true;
        Ok(self.port_json(c, &self.channels[c].members[at]))
    }

    fn set_short(&mut self, channel: &str, shorted: bool) -> ControlResult {
        let index = self.channel_index(channel)? as usize;
        if self.channels[index].shorted == shorted {
            let what = if shorted { "already shorted" } else { "not shorted" };
            return Err(ControlError::Conflict(format!("channel '{channel}' is {what}")));
        }
        self.channels[index].shorted = shorted;
        self.dirty[index] = true;
        Ok(self.channel_json(index))
    }

    /// A LIN channel's master goes to sleep (at its next slot boundary) or
    /// wakes the channel (a pulse at once); the channel as it is then.
    fn lin_power(&mut self, channel: &str, sleep: bool) -> ControlResult {
        let index = self.channel_index(channel)? as usize;
        let now_ns = self.clock.now();
        self.channels[index].lin_ask(sleep, now_ns).map_err(|why| {
            let text = format!("channel '{channel}' {why}");
            match self.channels[index].lin_power() {
                Some(_) => ControlError::Conflict(text),
                None => ControlError::Invalid(text),
            }
        })?;
        self.dirty[index] = true;
        Ok(self.channel_json(index))
    }

    fn start_recording(&mut self, spec: RecordingSpec, path: PathBuf) -> ControlResult {
        let format = match spec.format.as_deref() {
            Some("candump") => RecordingFormat::Candump,
            Some("asc") => RecordingFormat::Asc,
            Some(other) => return Err(ControlError::Invalid(format!("format '{other}' is neither candump nor asc"))),
            None => RecordingFormat::from_path(&path).ok_or_else(|| {
                ControlError::Invalid(format!(
                    "cannot tell the format of '{}': use .log or .asc, or give \"format\"",
                    spec.path
                ))
            })?,
        };
        let channels = if spec.channels.is_empty() {
            self.channels.iter().map(|c| (c.id, c.name().to_owned())).collect()
        } else {
            spec.channels
                .iter()
                .map(|name| self.channel_index(name).map(|id| (id, name.clone())))
                .collect::<Result<Vec<_>, _>>()?
        };
        if self.recordings.iter().any(|r| r.path == path && r.state().is_writing()) {
            return Err(ControlError::Conflict(format!("'{}' is being recorded already", spec.path)));
        }
        let writing = self.recordings.iter().filter(|r| r.state().is_writing()).count();
        if writing >= MAX_RECORDINGS {
            return Err(ControlError::Conflict(format!(
                "the hub writes at most {MAX_RECORDINGS} recordings at once (those still finishing their file \
                 included); stop one first, or wait until a stopped one is finished"
            )));
        }
        let Some(recorder) = &self.recorder else {
            return Err(ControlError::Conflict("this bus runs without a recorder: it cannot write recordings".into()));
        };
        let id = self.next_recording_id;
        let start = RecordingStart { id, path: &path, format, channels: &channels, start_ns: self.clock.now() };
        let tap =
            recorder.start(start).map_err(|e| ControlError::Invalid(format!("cannot write '{}': {e}", spec.path)))?;
        let recording = Recording::new(id, path, spec.path.clone(), format, channels, tap);
        self.next_recording_id += 1;
        let answer = recording_json(&recording);
        // A finished recording of the same file is superseded by this one.
        self.recordings.retain(|r| r.path != recording.path || r.state().is_writing());
        self.recordings.push(recording);
        self.forget_finished_recordings();
        Ok(answer)
    }

    /// Tell the recording's writer to finish; never waits for the file. The
    /// answer says `stopping`; the recording's `state` says how it ended.
    fn stop_recording(&mut self, id: u32) -> ControlResult {
        let recording = self
            .recordings
            .iter_mut()
            .find(|r| r.id == id)
            .ok_or_else(|| ControlError::NotFound(format!("no recording with id {id}")))?;
        recording.stop();
        let answer = recording_json(recording);
        self.forget_finished_recordings();
        Ok(answer)
    }

    /// Keep at most [`FINISHED_KEPT`] finished recordings listed, the newest.
    fn forget_finished_recordings(&mut self) {
        let finished = self.recordings.iter().filter(|r| !r.state().is_writing()).count();
        let mut excess = finished.saturating_sub(FINISHED_KEPT);
        self.recordings.retain(|r| {
            let forget = excess > 0 && !r.state().is_writing();
            excess -= usize::from(forget);
            !forget
        });
    }

    fn remove_route(&mut self, id: u32) -> ControlResult {
        let at = self
            .routes
            .iter()
            .position(|r| r.id == id)
            .ok_or_else(|| ControlError::NotFound(format!("no route with id {id}")))?;
        let answer = self.route_json(&self.routes[at]);
        let route = self.routes.remove(at);
        self.channels[route.to as usize].detach(route.port_id);
        Ok(answer)
    }
}
