//! A LIN channel's standing responses (spec/protocol.md 4.1.1): per
//! identifier, the response a slave's port keeps in its buffer, which
//! answers every unconditional header of that identifier until the port
//! replaces it, withdraws it or leaves.
//!
//! - A standing record takes effect when the bus reads it, never waiting in
//!   the port's FIFO: a slave's buffer holds the latest value, and the next
//!   header carries it whatever else the port has queued.
//! - One port at a time stands for an identifier (on a real bus two slaves
//!   answering one unconditional header is a wiring fault), so a second
//!   port's standing response is refused, as is the withdrawal of one the
//!   port does not have.
//! - What it keeps is the frame the bus carries: without `LIN_STANDING`,
//!   which only a client's request has.

use fieldhub_proto::{lin, Frame};

use crate::port_id::PortId;

/// The standing responses of one LIN channel, one slot per identifier.
pub struct StandingResponses {
    /// Indexed by identifier 0..=0x3F: the port and the frame it answers with.
    by_id: Vec<Option<(PortId, Frame)>>,
}

impl StandingResponses {
    pub fn new() -> Self {
        Self { by_id: vec![None; usize::from(lin::MAX_ID) + 1] }
    }

    /// Apply `request` (a `LIN_STANDING` frame) from `port`: stand for its
    /// identifier with its bytes, or with no data withdraw. The error says
    /// why it may not.
    pub fn apply(&mut self, port: PortId, request: &Frame) -> Result<(), String> {
        let id = request.id() as u8;
        let Some(slot) = self.by_id.get_mut(usize::from(id)) else {
            return Err(format!("names identifier 0x{id:02X}, over 0x3F"));
        };
        let owner = slot.as_ref().map(|(owner, _)| *owner);
        match (owner, request.is_empty()) {
            (Some(owner), false) if owner != port => Err(format!(
                "publishes a standing response for 0x{id:02X}, for which another port of the channel stands; \
                 one slave answers an identifier (withdraw it there first)"
            )),
            (_, false) => {
                *slot = Some((port, request.clone().without_standing()));
                Ok(())
            }
            (Some(owner), true) if owner == port => {
                *slot = None;
                Ok(())
            }
            (_, true) => Err(format!("withdraws a standing response for 0x{id:02X}, which it does not have")),
        }
    }

    /// The port that stands for identifier `id`, and its response.
    pub fn of(&self, id: u8) -> Option<(PortId, Frame)> {
        self.by_id.get(usize::from(id)).cloned().flatten()
    }

    /// `port` left the channel: its responses go with it.
    pub fn forget(&mut self, port: PortId) {
        for slot in &mut self.by_id {
            if slot.as_ref().is_some_and(|(owner, _)| *owner == port) {
                *slot = None;
            }
        }
    }
}
