//! Stall reports in virtual time: a participant that has not ended its
//! step within the step timeout is named in the log, in the time status
//! (`waits_for`) and to itself, with what holds it — its own step, or a
//! lossless port without room that holds its channel. A participant's send
//! never waits (the hub refuses frames past what it holds of one), so no
//! report can name a send as what holds bus time.

use std::time::Instant;

use fieldhub_proto::wire::ErrorCode;
use tracing::warn;

use super::Bus;
use crate::credit::TX_CREDITS;
use crate::inbox::ClientId;
use crate::outbox::Outbound;

impl Bus {
    /// When the bus must look at stalled participants at the latest.
    pub fn stall_deadline(&self) -> Option<Instant> {
        self.virtual_time.as_ref().and_then(|vt| vt.stall_deadline())
    }

    /// Report every participant whose step timeout passed: in the log, in
    /// the time status and to the participant itself (flushed at once) —
    /// with the lossless port that holds its frames back, if one does.
    pub fn report_stalls(&mut self) {
        let Some(vt) = self.virtual_time.as_mut() else { return };
        let timeout = vt.step_timeout();
        for stall in vt.stalls() {
            let consequence = match stall.dropped {
                true => "dropped from synchronisation; bus time goes on without it",
                false => "bus time waits for it",
            };
            let waits_for = self.waits_for(stall.client);
            warn!(client = stall.client, name = %stall.name, "participant stalled: no STEP within {timeout:?} of GRANT {}; {consequence}; {waits_for}", stall.granted_ns);
            let text = format!("no STEP within {timeout:?} of GRANT {}; {consequence}; {waits_for}", stall.granted_ns);
            if let Some(vt) = self.virtual_time.as_mut() {
                vt.stalled_for(stall.client, &waits_for);
            }
            let error = Outbound::Error { code: ErrorCode::StepTimeout, request: 0, fatal: false, text };
            self.reply(stall.client, error);
            if stall.dropped {
                // It goes on as an observer, which holds nothing back, and
                // whose sends wait for credit as in real time.
                self.make_lossy(stall.client);
                if let Some(owner) = self.clients.get(&stall.client) {
                    owner.credit.set_limit(TX_CREDITS);
                }
            }
        }
        if let Some((names, held)) = self.virtual_time.as_mut().and_then(|vt| vt.awaited_too_long()) {
            let text = format!(
                "bus time has not moved for {timeout:?}: it waits for '{}' of [hub] time_participants to join \
                 (start them with the synchronized option, or remove them from time_participants)",
                names.join("', '")
            );
            warn!("{text}");
            for client in held {
                let error =
                    Outbound::Error { code: ErrorCode::StepTimeout, request: 0, fatal: false, text: text.clone() };
                self.reply(client, error);
            }
        }
        self.flush_outboxes();
    }

    /// What a stalled participant waits for, as its report names it: a
    /// lossless receiver without room, or its own step not ended.
    fn waits_for(&self, client: ClientId) -> String {
        match self.held_behind(client) {
            Some(why) => format!("lossless receiver full: {why}"),
            None => "step not ended: it has not sent STEP (still computing, or hung)".to_owned(),
        }
    }

    /// Why `client`'s step may be unable to end: its frames wait on a
    /// channel that a lossless port without room holds. Names that port
    /// and its client.
    fn held_behind(&self, client: ClientId) -> Option<String> {
        let owner = self.clients.get(&client)?;
        owner.ports.iter().flatten().find_map(|owned| {
            let channel = &self.channels[owned.channel as usize];
            let holder = channel.held_by?;
            let waiting =
                channel.members.get(owned.member).is_some_and(|m| m.port_id == owned.port_id && !m.tx.is_empty());
            if !waiting {
                return None;
            }
            let port = self.port_names.get(&holder).map_or("?", String::as_str);
            let reader = channel.members.iter().find(|m| m.port_id == holder).map(|m| m.client);
            let holder = match reader.and_then(|reader| self.clients.get(&reader).map(|c| (reader, c))) {
                Some((reader, _)) if reader == client => format!("its own lossless port '{port}'"),
                Some((_, reader)) => format!("the lossless port '{port}' of '{}'", reader.name),
                None => format!("the lossless port '{port}'"),
            };
            Some(format!(
                "its frames wait on channel '{}', held by {holder}, which does not read what it receives (a \
                 participant's lossless port holds its channel until it has room)",
                channel.name()
            ))
        })
    }
}
