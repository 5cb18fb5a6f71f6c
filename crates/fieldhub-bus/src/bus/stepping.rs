//! The bus side of virtual time ([`super::virtual_time`] says how and why):
//! participants joining and announcing their steps, frames held until the
//! step ends, each advance of bus time, stalled participants reported.

use std::time::Instant;

use fieldhub_proto::stats::TimeStats;
use fieldhub_proto::wire::ErrorCode;
use fieldhub_proto::Frame;
use serde_json::{json, Value};
use tracing::{info, warn};

use super::virtual_time::RunLimit;
use super::Bus;
use crate::inbox::ClientId;
use crate::outbox::Outbound;
use crate::port_id::PortId;
use crate::request::{ControlError, ControlResult, TimeCommand};

impl Bus {
    /// A synchronised participant attached: it stands at the current bus
    /// time and learns it from its first `GRANT`.
    pub(super) fn join_time(&mut self, client: ClientId) {
        let Some(vt) = self.virtual_time.as_mut() else { return };
        let Some(name) = self.clients.get(&client).map(|c| c.name.clone()) else { return };
        let now_ns = vt.join(client, &name);
        info!(client, name, now_ns, "participant joined virtual time");
        self.reply(client, Outbound::Grant { now_ns });
    }

    /// `STEP`: the participant is done up to `until_ns`. A refused step is
    /// a non-fatal error; the participant's step stays as it was.
    pub(super) fn on_step(&mut self, client: ClientId, until_ns: u64) {
        let refused = match self.virtual_time.as_mut() {
            None => "STEP on a hub in real time; it needs [hub] time = \"virtual\"".to_owned(),
            Some(vt) => match vt.announce(client, until_ns) {
                Ok(()) => return,
                Err(why) => why.to_string(),
            },
        };
        let error = Outbound::Error { code: ErrorCode::TimeMode, request: 0, fatal: false, text: refused };
        self.reply(client, error);
    }

    /// In virtual time a frame waits for the end of the step it was sent
    /// in, so that the order it is queued in does not depend on when the
    /// bus happened to read it.
    pub(super) fn stage_frame(&mut self, client: ClientId, port: u16, frame: Frame) {
        let port_id = self
            .clients
            .get(&client)
            .and_then(|c| c.ports.get(port as usize).copied().flatten())
            .map(|owned| owned.port_id);
        if let Some(vt) = self.virtual_time.as_mut() {
            vt.stage(client, port, port_id, frame);
        }
    }

    /// Advance bus time if every participant is done with its step: queue
    /// the staged frames in their fixed order, serve the channels at every
    /// deadline up to the target and at the target, then grant the
    /// participants whose boundary it is. Returns whether time moved.
    pub(super) fn advance_virtual_time(&mut self) -> bool {
        let Some(target) = self.virtual_time.as_ref().and_then(|vt| vt.target()) else { return false };
        self.queue_staged();
        let mut next = self.step();
        while let Some(at) = next.filter(|&at| at <= target) {
            if let Some(vt) = self.virtual_time.as_mut() {
                vt.move_clock(at.max(vt.now()));
            }
            next = self.step();
        }
        let Some(vt) = self.virtual_time.as_mut() else { return false };
        vt.move_clock(target);
        self.step();
        let granted = self.virtual_time.as_mut().map(|vt| vt.grant(target)).unwrap_or_default();
        for client in granted {
            self.reply(client, Outbound::Grant { now_ns: target });
        }
        true
    }

    /// The step's frames, in (port name, order sent) order — never in the
    /// order the bus read them — into their ports' FIFOs at the current bus time.
    fn queue_staged(&mut self) {
        let Some(vt) = self.virtual_time.as_mut() else { return };
        let mut staged = std::mem::take(&mut vt.staged);
        let names = &self.port_names;
        let name = |port_id: Option<PortId>| port_id.and_then(|id| names.get(&id)).map_or("", String::as_str);
        staged.sort_unstable_by(|a, b| name(a.port_id).cmp(name(b.port_id)).then(a.order.cmp(&b.order)));
        for s in staged.drain(..) {
            self.queue_frame(s.client, s.port, s.frame);
        }
        if let Some(vt) = self.virtual_time.as_mut() {
            // Hand the emptied buffer back: no allocation per step.
            vt.staged = staged;
        }
    }

    /// Drop the frames `client` sent on `port` (every port: `None`) in the
    /// current step, returning their transmit credit: the port closes, or
    /// the client leaves, before the step ends.
    pub(super) fn discard_staged(&mut self, client: ClientId, port: Option<u16>) {
        let Some(vt) = self.virtual_time.as_mut() else { return };
        let discarded = vt.discard(client, port);
        if let Some(owner) = self.clients.get(&client) {
            (0..discarded).for_each(|_| owner.credit.release());
        }
    }

    /// When the bus must look at stalled participants at the latest.
    pub fn stall_deadline(&self) -> Option<Instant> {
        self.virtual_time.as_ref().and_then(|vt| vt.stall_deadline())
    }

    /// Report every participant whose step timeout passed: in the log, in
    /// the time status and to the participant itself (flushed at once).
    pub fn report_stalls(&mut self) {
        let Some(vt) = self.virtual_time.as_mut() else { return };
        let timeout = vt.step_timeout();
        for stall in vt.stalls() {
            let consequence = match stall.dropped {
                true => "dropped from synchronisation; bus time goes on without it",
                false => "bus time waits for it",
            };
            warn!(client = stall.client, name = %stall.name, "participant stalled: no STEP within {timeout:?} of GRANT {}; {consequence}", stall.granted_ns);
            let text = format!("no STEP within {timeout:?} of GRANT {}; {consequence}", stall.granted_ns);
            let error = Outbound::Error { code: ErrorCode::StepTimeout, request: 0, fatal: false, text };
            self.reply(stall.client, error);
        }
        self.flush_outboxes();
    }

    /// `GET /api/v1/time`: bus time; in virtual time also the participants
    /// and the control API's hold.
    pub(super) fn time_json(&self) -> Value {
        match &self.virtual_time {
            None => json!({"mode": "real", "now_ns": self.clock.now()}),
            Some(vt) => {
                let mut status = serde_json::to_value(vt.status()).unwrap_or_default();
                status["mode"] = json!("virtual");
                status
            }
        }
    }

    /// `POST /api/v1/time`: hold, release or step virtual time. The bus
    /// loop advances (or not) right after this request.
    pub(super) fn set_time(&mut self, command: TimeCommand) -> ControlResult {
        let Some(vt) = self.virtual_time.as_mut() else {
            return Err(ControlError::Conflict("the hub runs in real time; set [hub] time = \"virtual\"".into()));
        };
        let limit = match command {
            TimeCommand::Pause => RunLimit::Paused,
            TimeCommand::Resume => RunLimit::Running,
            TimeCommand::Step => RunLimit::SingleStep,
            TimeCommand::RunUntil { until_ns } if until_ns <= vt.now() => {
                return Err(ControlError::Invalid(format!("bus time is already {} ns, past {until_ns} ns", vt.now())));
            }
            TimeCommand::RunUntil { until_ns } => RunLimit::Until(until_ns),
        };
        vt.set_limit(limit);
        Ok(self.time_json())
    }

    /// The `time` part of `STATS`: present in virtual time only.
    pub(super) fn time_stats(&self) -> Option<TimeStats> {
        let status = self.virtual_time.as_ref()?.status();
        let state = match status.limit {
            RunLimit::Running => "running",
            RunLimit::Paused => "paused",
            RunLimit::Until(_) => "until",
            RunLimit::SingleStep => "single_step",
        };
        Some(TimeStats {
            now_ns: status.now_ns,
            real_time_factor: status.real_time_factor,
            participants: status.participants.len() as u32,
            state: state.into(),
        })
    }
}
