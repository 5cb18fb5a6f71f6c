//! A LIN slave's standing response as the bus receives it (spec/protocol.md
//! 4.1.1): applied to its channel's schedule when the bus reads it, never
//! queued — the next header of its identifier carries it. Its transmit
//! credit returns at once; each answer it gives later is a frame on the bus
//! from its port. A refusal (another port stands for the identifier,
//! nothing to withdraw) is told to the client and counted on the port, as a
//! frame refused as it comes.

use fieldhub_proto::wire::ErrorCode;
use fieldhub_proto::Frame;

use super::{Bus, OwnedPort};
use crate::inbox::ClientId;
use crate::outbox::Outbound;

impl Bus {
    /// Apply `request`, a `LIN_STANDING` frame from the port `owned` whose
    /// credit the caller returned; refuse it with the reason if it may not.
    pub(super) fn apply_standing(&mut self, client_id: ClientId, owned: OwnedPort, request: &Frame) {
        let channel = &mut self.channels[owned.channel as usize];
        let Err(why) = channel.stand(owned.port_id, request) else {
            self.dirty[owned.channel as usize] = true;
            return;
        };
        if let Some(member) = channel.members.get_mut(owned.member).filter(|m| m.port_id == owned.port_id) {
            member.counters.tx_refused += 1;
        }
        let name = self.port_names.get(&owned.port_id).map_or("?", String::as_str);
        let text = format!("port '{name}' {why}; {request:?} was not applied (see docs/buses.md)");
        let error = Outbound::Error { code: ErrorCode::InvalidFrame, request: 0, fatal: false, text };
        self.reply(client_id, error);
    }
}
