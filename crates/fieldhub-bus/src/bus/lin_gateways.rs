//! The bus's CAN↔LIN gateways (`[[gateway]]`, [`crate::lin_gateway`]): each
//! has a sending port of its own on its `to` channel — on a LIN channel the
//! node it publishes as, so the master's schedule carries its responses in
//! their slots — and sees every frame its `from` channel carries, after the
//! gateway routes, in the channel's order.
//!
//! A frame it maps joins its port's FIFO with the bus time it was read at
//! (its end of frame), so a CAN frame's response waits for its identifier's
//! next slot and a LIN response's CAN frame arbitrates from the response's
//! end. A frame that cannot cross is counted by [`Refusal`] on the gateway,
//! the first of each reason logged with its words, the last kept for
//! `ctl gateways`; a frame its port later drops is counted on the port
//! (`dropped`). Only frames sent on `from` directly cross (one hop), so two
//! gateways that map a frame back cannot loop.
//!
//! The control API adds and removes gateways while the hub runs
//! ([`LinGateways::add`], [`LinGateways::remove`]), with the configuration's
//! checks. Each has a number that stays its own (the configuration's are
//! numbered in their order from 0); a removed gateway's port leaves its
//! channel, and the frames still waiting in it are counted as dropped in the
//! removal's answer, never sent.

use fieldhub_proto::Frame;
use serde_json::{json, Value};
use tracing::{error, warn};

use crate::channel::{Channel, Transmitted};
use crate::config::MAX_ROUTES;
use crate::lin_gateway::{Direction, GatewayConfig, Mapping, Refusal, MAX_GATEWAYS};
use crate::member::{Member, GATEWAY_QUEUE};
use crate::port_id::PortId;
use crate::request::ControlError;
use crate::tx_queue::Pending;

/// One gateway as the bus runs it.
struct Gateway {
    /// The number the control API names it by.
    id: u32,
    config: GatewayConfig,
    mapping: Mapping,
    from: u16,
    to: u16,
    /// Its sending port on `to`.
    port_id: PortId,
    /// Frames mapped and queued on `to`.
    carried: u64,
    /// Frames refused, by [`Refusal::index`].
    refused: [u64; Refusal::ALL.len()],
    /// The last refused frame and why, put in words when asked.
    last_refused: Option<(Refusal, Frame)>,
}

/// Every gateway of a bus.
#[derive(Default)]
pub(super) struct LinGateways {
    gateways: Vec<Gateway>,
    /// The number the next gateway added gets.
    next_id: u32,
}

impl LinGateways {
    /// The gateways of `configs` between `channels`, each with its port
    /// added to its `to` channel. A table the configuration's checks would
    /// refuse is left out and logged (the hub checks every table before it
    /// makes a bus).
    pub fn new(configs: &[GatewayConfig], channel_ids: impl Fn(&str) -> Option<u16>, channels: &mut [Channel]) -> Self {
        let mut gateways = Self { gateways: Vec::with_capacity(configs.len()), next_id: 0 };
        for (i, config) in configs.iter().enumerate() {
            // Numbered as the configuration lists them, a left-out one too.
            gateways.next_id = i as u32;
            let (Some(from), Some(to)) = (channel_ids(&config.from), channel_ids(&config.to)) else {
                error!("gateway[{i}]: no channel '{}' or '{}'; the gateway is left out", config.from, config.to);
                continue;
            };
            if let Err((key, why)) = gateways.add(config.clone(), from, to, channels) {
                error!("gateway[{i}].{key}: {why}; the gateway is left out");
            }
        }
        gateways.next_id = configs.len() as u32;
        gateways
    }

    /// Add a gateway between channels `from` and `to` (indices), checked as
    /// the configuration is ([`Mapping::new`]; the error names the key), with
    /// its port on `to`; returns its number.
    pub fn add(
        &mut self,
        config: GatewayConfig,
        from: u16,
        to: u16,
        channels: &mut [Channel],
    ) -> Result<u32, (&'static str, String)> {
        let mapping = Mapping::new(&config, &channels[from as usize].config, &channels[to as usize].config)?;
        // Gateway port slots after the routes' (MAX_ROUTES + MAX_GATEWAYS
        // fits a u16), reused as gateways go.
        let port_id = (MAX_ROUTES..MAX_ROUTES + MAX_GATEWAYS)
            .map(|slot| PortId::gateway(u16::try_from(slot).expect("MAX_ROUTES + MAX_GATEWAYS fits a u16")))
            .find(|p| !self.gateways.iter().any(|g| g.port_id == *p))
            .ok_or_else(|| ("gateway", format!("a hub carries at most {MAX_GATEWAYS} gateways; remove one first")))?;
        let destination = &mut channels[to as usize];
        destination.members.push(Member::gateway(port_id));
        if let Some(node) = &config.node {
            destination.name_port(port_id, node);
        }
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        self.gateways.push(Gateway {
            id,
            config,
            mapping,
            from,
            to,
            port_id,
            carried: 0,
            refused: [0; Refusal::ALL.len()],
            last_refused: None,
        });
        Ok(id)
    }

    /// Remove gateway `id`: its port leaves its channel, and the frames still
    /// waiting in it are not sent (counted in `dropped`). Returns it as
    /// `ctl gateways` listed it last, with those counted.
    pub fn remove(&mut self, id: u32, channels: &mut [Channel]) -> Result<Value, ControlError> {
        let at = self.gateways.iter().position(|g| g.id == id).ok_or_else(|| {
            ControlError::NotFound(format!("no gateway {id}; `fieldhub ctl gateways` lists them by `gateway`"))
        })?;
        let gateway = self.gateways.remove(at);
        let destination = &mut channels[gateway.to as usize];
        let dropped = destination.detach(gateway.port_id).map_or(0, |port| port.counters.tx_dropped);
        let mut answer = gateway.json(destination, dropped);
        answer["removed"] = json!(true);
        Ok(answer)
    }

    /// Gateway `id` as `ctl gateways` lists it.
    pub fn one_json(&self, id: u32, channels: &[Channel]) -> Value {
        self.gateways.iter().find(|g| g.id == id).map_or(Value::Null, |g| g.listed(channels))
    }

    /// Whether a gateway reads or sends on channel `index`.
    pub fn use_channel(&self, index: usize) -> bool {
        self.gateways.iter().any(|g| g.from as usize == index || g.to as usize == index)
    }

    /// Map `sent` along every gateway that reads it, queueing what crosses
    /// on its port (`next_arrival` numbers it, `dirty` marks its channel).
    /// Returns whether a channel got new work.
    pub fn carry(
        &mut self,
        sent: &Transmitted,
        channels: &mut [Channel],
        next_arrival: &mut u64,
        dirty: &mut [bool],
    ) -> bool {
        let mut queued = false;
        for gateway in &mut self.gateways {
            if gateway.from != sent.channel || sent.hops > 0 || !gateway.mapping.matches(&sent.frame) {
                continue;
            }
            let destination = &mut channels[gateway.to as usize];
            let mapped = gateway.mapping.map(&sent.frame).and_then(|frame| match gateway.mapping.direction {
                Direction::CanToLin if destination.arbitration_refuses(gateway.port_id, &frame).is_some() => {
                    Err(Refusal::Schedule)
                }
                _ => Ok(frame),
            });
            let Some(port) = destination.member_mut(gateway.port_id) else { continue };
            let frame = match mapped {
                Ok(_) if port.tx.len() >= GATEWAY_QUEUE => Err(Refusal::QueueFull),
                other => other,
            };
            match frame {
                Ok(frame) => {
                    let pending =
                        Pending { frame, arrival: *next_arrival, hops: sent.hops + 1, arrived_ns: sent.timestamp_ns };
                    port.tx.push(pending);
                    *next_arrival += 1;
                    gateway.carried += 1;
                    dirty[gateway.to as usize] = true;
                    queued = true;
                }
                Err(reason) => gateway.refuse(reason, sent.frame.clone(), destination),
            }
        }
        queued
    }

    /// `ctl gateways`: each gateway's table, direction and counters.
    pub fn json(&self, channels: &[Channel]) -> Value {
        Value::Array(self.gateways.iter().map(|g| g.listed(channels)).collect())
    }
}

impl Gateway {
    /// As `ctl gateways` lists it: its table, direction and counters.
    fn listed(&self, channels: &[Channel]) -> Value {
        let destination = &channels[self.to as usize];
        let dropped =
            destination.members.iter().find(|m| m.port_id == self.port_id).map_or(0, |m| m.counters.tx_dropped);
        self.json(destination, dropped)
    }

    fn json(&self, destination: &Channel, dropped: u64) -> Value {
        let refused: serde_json::Map<String, Value> =
            Refusal::ALL.iter().map(|r| (r.name().to_owned(), json!(self.refused[r.index()]))).collect();
        let last = self.last_refused.as_ref().map(|(reason, frame)| self.explain(*reason, frame, destination));
        json!({
            "gateway": self.id,
            "from": self.config.from,
            "to": self.config.to,
            "direction": self.mapping.direction,
            "can_id": self.config.can_id,
            "extended": self.config.extended,
            "lin_id": self.config.lin_id,
            "node": self.config.node,
            "length": self.mapping.length,
            "carried": self.carried,
            "refused": refused,
            "last_refused": last,
            "dropped": dropped,
        })
    }

    /// `frame` did not cross for `reason`: count it, keep it for `ctl
    /// gateways`, and log the first of each reason.
    fn refuse(&mut self, reason: Refusal, frame: Frame, destination: &Channel) {
        let count = &mut self.refused[reason.index()];
        *count += 1;
        if *count == 1 {
            let why = self.explain(reason, &frame, destination);
            warn!(
                "gateway {} -> {}: {why}; the frame was not sent on '{}' (further refusals are counted in `fieldhub ctl gateways`)",
                self.config.from, self.config.to, self.config.to
            );
        }
        self.last_refused = Some((reason, frame));
    }

    fn explain(&self, reason: Refusal, frame: &Frame, destination: &Channel) -> String {
        let lin_refuses = match (reason, self.mapping.map(frame)) {
            (Refusal::Schedule, Ok(response)) => destination.arbitration_refuses(self.port_id, &response),
            _ => None,
        };
        self.mapping.explain(reason, frame, lin_refuses)
    }
}
