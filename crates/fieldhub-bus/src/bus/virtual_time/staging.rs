//! Frames held until their step ends ([`Staged`]), in the order sent, and
//! the count of each participant's: what the hub holds of a participant is
//! its FIFOs at the grant plus these (the parent's "Overload"). Observers'
//! ports that stay until their frames are on the bus ([`Lingering`]).

use fieldhub_proto::Frame;

use super::VirtualTime;
use crate::inbox::ClientId;
use crate::member::Member;
use crate::port_id::PortId;

/// A frame sent during the current step, waiting for the step's end.
#[derive(Clone, Debug)]
pub struct Staged {
    pub client: ClientId,
    pub port: u16,
    /// Hub-wide id of the sending port (`None` if the port is not open: the
    /// frame is refused when it is queued, in its place in the order).
    pub port_id: Option<PortId>,
    /// Order among all staged frames: keeps a port's frames in FIFO order.
    pub order: u64,
    pub frame: Frame,
}

/// An observer's port that closed, or whose client left, while frames it
/// had sent still waited for bus time: it stays on its channel, receiving
/// nothing and sending only, until they are on the bus — a frame an
/// observer sent is never lost to its leaving.
pub struct Lingering {
    pub channel: u16,
    pub port_id: PortId,
    /// The port while it is off its channel: from its departure (when the
    /// bus releases it) to the next advance, at which its frames compete
    /// at the current bus time. `None` once it is back on the channel.
    pub member: Option<Member>,
}

impl VirtualTime {
    /// Hold a frame until the step ends.
    pub fn stage(&mut self, client: ClientId, port: u16, port_id: Option<PortId>, frame: Frame) {
        self.staged.push(Staged { client, port, port_id, order: self.next_order, frame });
        self.next_order += 1;
        if let Some(participant) = self.participants.get_mut(&client) {
            participant.staged += 1;
        }
    }

    /// Frames `client` staged in the current step (0 for an observer).
    pub fn staged_by(&self, client: ClientId) -> u32 {
        self.participants.get(&client).map_or(0, |p| p.staged)
    }

    /// The staged frames go to their FIFOs: take them out, leaving the
    /// buffer to be handed back.
    pub fn take_all_staged(&mut self) -> Vec<Staged> {
        self.participants.values_mut().for_each(|p| p.staged = 0);
        std::mem::take(&mut self.staged)
    }

    /// Take the staged frames of `client`'s `port` out, in the order sent.
    pub fn take_staged(&mut self, client: ClientId, port: u16) -> Vec<Staged> {
        let mut taken = Vec::new();
        self.staged.retain(|s| match s.client == client && s.port == port {
            true => {
                taken.push(s.clone());
                false
            }
            false => true,
        });
        if let Some(participant) = self.participants.get_mut(&client) {
            participant.staged = participant.staged.saturating_sub(taken.len() as u32);
        }
        taken
    }

    /// Forget the staged frames of `client` on `port` (all its ports:
    /// `None`); returns how many.
    pub fn discard(&mut self, client: ClientId, port: Option<u16>) -> usize {
        let before = self.staged.len();
        self.staged.retain(|s| s.client != client || port.is_some_and(|p| p != s.port));
        let discarded = before - self.staged.len();
        if let Some(participant) = self.participants.get_mut(&client) {
            participant.staged = participant.staged.saturating_sub(discarded as u32);
        }
        discarded
    }
}
