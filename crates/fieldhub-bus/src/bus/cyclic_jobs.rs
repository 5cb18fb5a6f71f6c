//! Cyclic jobs driven by the bus loop: a client's port sends a producer's
//! frame every period on bus time ([`crate::cyclic`] keeps the schedule).
//! Every [`Bus::step`] first runs the jobs due by its bus time, then serves
//! the channels, and returns the earliest job's due time among its
//! deadlines — so in real time the runtime wakes for it, and in virtual
//! time each advance serves every cycle inside the step at its exact time.
//!
//! Invariants:
//! - A job's frame goes the way a frame its client forwarded goes: it takes
//!   a transmit credit and enters its port's FIFO through
//!   `Bus::queue_frame`, so arbitration, rate limits, `unplug`, bus-off and
//!   fault rules apply, and its fate is told to its client. With no credit
//!   left (its port's FIFO is full) it is dropped as `queue_full`, counted
//!   on its port and reported — never queued without bound.
//! - In virtual time a job's frame is not staged: the bus makes it at bus
//!   time, which is already fixed, so it goes straight to its FIFO.
//! - A job belongs to the client that added it: only that client changes or
//!   removes it, and it ends with its port or its client.
//! - Running the jobs allocates nothing once the reused buffer has grown
//!   to the most frames due at one time.
//! - The frames of one run arrive at one bus time, the run's: frames due
//!   together arbitrate by identifier, in real time as in virtual time.

use fieldhub_proto::fate::DropReason;

use super::Bus;
use crate::cyclic::JobError;
use crate::inbox::{ClientId, CyclicRequest};

impl Bus {
    /// Apply a client's cyclic-job request and answer it.
    pub(super) fn on_cyclic(&mut self, client: ClientId, request: CyclicRequest) {
        let now_ns = self.clock.now();
        match request {
            CyclicRequest::Add { port, producer, period_ns, start_delay_ns, origin, reply } => {
                let open =
                    self.clients.get(&client).and_then(|c| c.ports.get(port as usize)).is_some_and(Option::is_some);
                let from_ns = origin.map_or(now_ns, |origin| origin.at(now_ns));
                reply(match open {
                    true => self.cyclic.add((client, port), producer, period_ns, start_delay_ns, from_ns),
                    false => Err(JobError::PortNotOpen(port)),
                });
            }
            CyclicRequest::Update { id, period_ns, start_delay_ns, reply } => {
                let owned = self.owned_job(client, id);
                reply(owned.and_then(|()| self.cyclic.update(id, period_ns, start_delay_ns, now_ns)).map(|()| id));
            }
            CyclicRequest::Remove { id, reply } => {
                let owned = self.owned_job(client, id);
                reply(owned.and_then(|()| self.cyclic.remove(id)).map(|_producer| id));
            }
        }
    }

    /// `Ok` if job `id` is one of `client`'s; another client's job is, to
    /// it, no job at all.
    fn owned_job(&self, client: ClientId, id: crate::cyclic::JobId) -> Result<(), JobError> {
        match self.cyclic.port_of(id) {
            Ok((owner, _)) if owner == client => Ok(()),
            _ => Err(JobError::NoSuchJob(id)),
        }
    }

    /// Run the jobs due by `now_ns` and queue their frames, earliest cycle
    /// first (jobs due together in the order they were added).
    pub(super) fn run_cyclic(&mut self, now_ns: u64) {
        if self.cyclic.is_empty() {
            return;
        }
        let mut due = std::mem::take(&mut self.cyclic_due);
        self.cyclic.run_due(now_ns, |port, frame, _due_ns| due.push((port, frame)));
        // One arrival time for every frame of the run, as a take_input round
        // has: read per frame, the clock moves between them, and the first
        // would take an idle bus alone before the others arrived — frames
        // due together must meet in arbitration, lowest identifier first.
        let round = self.round_ns.replace(now_ns);
        for ((client, port), frame) in due.drain(..) {
            self.queue_cyclic(client, port, frame);
        }
        self.round_ns = round;
        self.cyclic_due = due;
    }

    fn queue_cyclic(&mut self, client_id: ClientId, port: u16, frame: fieldhub_proto::Frame) {
        let Some(client) = self.clients.get(&client_id) else { return };
        let Some(owned) = client.ports.get(port as usize).copied().flatten() else { return };
        if client.credit.try_acquire() {
            return self.queue_frame(client_id, port, frame);
        }
        let channel = &mut self.channels[owned.channel as usize];
        if let Some(member) = channel.members.get_mut(owned.member).filter(|m| m.port_id == owned.port_id) {
            member.dropped(DropReason::QueueFull, 1);
        }
    }
}
