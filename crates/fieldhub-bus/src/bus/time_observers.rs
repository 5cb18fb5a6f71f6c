//! Observers' ports in virtual time (the module doc of
//! [`super::virtual_time`], "Observers"): a port that closes, or whose
//! client leaves, with frames still waiting for bus time lingers on its
//! channel, sending only, until they are on the bus; an observer's
//! lossless port is lossy, as holding its channel would hold bus time.

use fieldhub_proto::wire::PortOptions;
use tracing::warn;

use super::virtual_time::Lingering;
use super::Bus;
use crate::inbox::ClientId;
use crate::member::Receiver;

impl Bus {
    /// Keep an observer's ports (`port`, or all: `None`) that have frames
    /// waiting for bus time: their staged frames join the port's transmit
    /// FIFO now, at the current bus time (refused there, with the reply a
    /// refusal gets, if the port may not send them), and a port with frames
    /// in its FIFO comes off its channel — before the bus releases it, so
    /// the release finds nothing — to return at the next advance, receiving
    /// nothing, until its frames are on the bus. Their transmit credit
    /// returns as they go, as for any port.
    pub(super) fn linger(&mut self, client: ClientId, port: Option<u16>) {
        let Some(owner) = self.clients.get(&client) else { return };
        let ports: Vec<(u16, super::OwnedPort)> = (0..owner.ports.len() as u16)
            .filter(|&handle| port.is_none_or(|p| p == handle))
            .filter_map(|handle| Some((handle, owner.ports[handle as usize]?)))
            .collect();
        for (handle, owned) in ports {
            let staged = self.virtual_time.as_mut().map(|vt| vt.take_staged(client, handle)).unwrap_or_default();
            for s in staged {
                self.queue_frame(client, handle, s.frame);
            }
            let channel = &mut self.channels[owned.channel as usize];
            // A LIN wake-up pulse it sent waits outside its FIFO.
            let waiting = channel.lin_pulse_waits(owned.port_id)
                || channel.members.get(owned.member).is_some_and(|m| m.port_id == owned.port_id && !m.tx.is_empty());
            if !waiting {
                continue;
            }
            let Some(mut member) = channel.members.remove(owned.member) else { continue };
            // Its client closed it or is gone: nothing may reach it now.
            member.receiver = Receiver::Gateway;
            let lingering = Lingering { channel: owned.channel, port_id: owned.port_id, member: Some(member) };
            if let Some(vt) = self.virtual_time.as_mut() {
                vt.lingering.push(lingering);
            }
        }
    }

    /// Put lingering ports back on their channels: bus time moves now, and
    /// their frames compete with the advance's others at the current bus time.
    pub(super) fn return_lingering(&mut self) {
        let Some(vt) = self.virtual_time.as_mut() else { return };
        for lingering in &mut vt.lingering {
            let index = lingering.channel as usize;
            // A channel removed meanwhile takes its ports' frames along.
            if self.channels[index].removed {
                continue;
            }
            let Some(member) = lingering.member.take() else { continue };
            self.channels[index].members.push(member);
            self.dirty[index] = true;
        }
    }

    /// Let go of lingering ports whose frames are all on the bus. A port
    /// stays while its channel is still busy (a deadline pending: a frame
    /// on the wire may fail and need its port to retransmit from); one
    /// whose channel was removed went with it.
    pub(super) fn retire_lingering(&mut self) {
        let Some(vt) = self.virtual_time.as_mut() else { return };
        let (channels, deadlines) = (&mut self.channels, &self.deadlines);
        vt.lingering.retain(|lingering| {
            let index = lingering.channel as usize;
            let channel = &mut channels[index];
            if channel.removed {
                return false;
            }
            if lingering.member.is_some() {
                return true;
            }
            let sending = channel.lin_pulse_waits(lingering.port_id)
                || channel.member_mut(lingering.port_id).is_some_and(|m| !m.tx.is_empty());
            if sending || deadlines[index].is_some() {
                return true;
            }
            channel.detach(lingering.port_id);
            false
        });
    }

    /// Make the lossless ports of every observer lossy once a port has
    /// opened since the last look (the module doc's "Observers" says why).
    pub(super) fn observers_lossy(&mut self) {
        let Some(vt) = self.virtual_time.as_mut() else { return };
        if vt.ports_seen == self.next_port_id {
            return;
        }
        vt.ports_seen = self.next_port_id;
        let observers: Vec<ClientId> = self.clients.keys().copied().filter(|&c| !vt.is_participant(c)).collect();
        for client in observers {
            self.make_lossy(client);
        }
    }

    /// Clear `BLOCK_ON_OVERFLOW` on `client`'s ports: from now on what a
    /// port has no room for is dropped, counted and reported to it with
    /// `RX_OVERFLOW`. A port is taken off its channel and put back, so the
    /// channel's count of lossless ports stays right.
    pub(super) fn make_lossy(&mut self, client: ClientId) {
        let Some(owner) = self.clients.get_mut(&client) else { return };
        for owned in owner.ports.iter_mut().flatten() {
            let index = owned.channel as usize;
            let members = &mut self.channels[index].members;
            let lossless = members.get(owned.member).is_some_and(|m| m.port_id == owned.port_id && m.is_lossless());
            if !lossless {
                continue;
            }
            let Some(mut member) = members.remove(owned.member) else { continue };
            if let Receiver::Client { options, .. } = &mut member.receiver {
                options.remove(PortOptions::BLOCK_ON_OVERFLOW);
            }
            owned.member = members.push(member);
            // A hold for this port ends at the channel's next service.
            self.dirty[index] = true;
            if let Some(vt) = self.virtual_time.as_mut().filter(|vt| !vt.told_lossless) {
                vt.told_lossless = true;
                let port = self.port_names.get(&owned.port_id).map_or("?", String::as_str);
                warn!(
                    client,
                    name = %owner.name,
                    "lossless port '{port}' of observer '{}' cannot hold virtual time: bus time waits only for \
                     synchronised participants, so in virtual time a lossless observer's port is lossy — frames \
                     it has no room for are dropped, counted (rx_dropped) and reported to it (RX_OVERFLOW). \
                     Logged once per hub",
                    owner.name
                );
            }
        }
    }
}
