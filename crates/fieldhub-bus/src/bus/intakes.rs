//! The clients whose rings the bus thread reads itself ([`Intake`]s), and
//! the order rules for their ends: a client whose session ended is detached
//! only once everything it published before is taken.

use crate::inbox::{ClientId, Inbound, Intake, IntakeEnd};

/// Messages the bus takes from one client's ring per round, so one busy
/// client cannot starve the others or postpone the channels' service.
pub const INTAKE_BUDGET: usize = 256;

struct Reading {
    client: ClientId,
    intake: Box<dyn Intake>,
    /// Set when the session ended: the ring is drained, then the client
    /// detaches with this reason.
    leaving: Option<String>,
}

/// What one round of reading brought.
pub enum Taken {
    /// Requests to handle, in ring order.
    Requests,
    /// The client is done (drained after its session ended, or said goodbye).
    Ended(ClientId, String),
    /// The client broke the protocol.
    Broke(ClientId, IntakeEnd),
}

#[derive(Default)]
pub struct Intakes {
    readings: Vec<Reading>,
    /// Requests taken from one ring, handled before the next ring (reused).
    pub requests: Vec<Inbound>,
}

impl Intakes {
    pub fn add(&mut self, client: ClientId, intake: Box<dyn Intake>) {
        self.readings.push(Reading { client, intake, leaving: None });
    }

    /// Stop reading a client's ring (it was removed).
    pub fn remove(&mut self, client: ClientId) {
        self.readings.retain(|r| r.client != client);
    }

    /// The client's session ended: drain its ring before it detaches.
    /// Returns false for clients without a ring (detach them at once).
    pub fn leave(&mut self, client: ClientId, reason: &str) -> bool {
        match self.readings.iter_mut().find(|r| r.client == client) {
            Some(reading) => {
                reading.leaving.get_or_insert_with(|| reason.to_owned());
                true
            }
            None => false,
        }
    }

    /// Whether any ring has a message that can be taken now.
    pub fn any_ready(&self) -> bool {
        self.readings.iter().any(|r| r.intake.ready())
    }

    /// Clients read.
    pub fn count(&self) -> usize {
        self.readings.len()
    }

    /// Read ring `index` into `self.requests`. Returns what happened and
    /// whether anything was taken.
    pub fn read(&mut self, index: usize) -> (Taken, bool) {
        let reading = &mut self.readings[index];
        let client = reading.client;
        match reading.intake.poll(&mut self.requests, INTAKE_BUDGET) {
            Ok(_) if reading.leaving.is_some() && reading.intake.drained() => {
                (Taken::Ended(client, reading.leaving.take().unwrap_or_default()), true)
            }
            Ok(took) => (Taken::Requests, took),
            Err(IntakeEnd::Left(reason)) => (Taken::Ended(client, reason), true),
            Err(end) => (Taken::Broke(client, end), true),
        }
    }
}
