//! `master-slave`: polling. One named port is the master; every frame it
//! sends is a poll of the next slave in its configured `poll` order, which
//! repeats. A slave transmits only when addressed: after a poll of it ends,
//! it may start one frame (its oldest) before `response_timeout_us` has
//! passed; then the master may poll again. A poll nobody answers keeps the
//! bus idle for the whole timeout. Other ports' frames wait, and a frame of
//! a port that is neither the master nor polled is refused as it comes.
//!
//! Timing: a poll `p` of slave `s` starting at `t` ends at `t + p`; the
//! answer `a`, if `s` has one queued by then, starts at `t + p` (or at its
//! arrival, if that is within the timeout) and the next poll follows it at
//! once. The polling cycle — one round of `poll` with every slave answering
//! at once — is Σ (poll + answer); an unanswered poll costs poll + timeout.
//! On an `ideal` channel frames take no time, but a timeout still waits
//! from the poll's end as if it had taken its time.

use fieldhub_proto::Frame;

use super::roles::Roles;
use super::{check_port_name, Arbiter, Candidate, Rates, MAX_TURN_US};
use crate::config::MasterSlaveConfig;
use crate::port_id::PortId;

/// The master's role in [`MasterSlaveArbiter::ports`].
const MASTER: usize = 0;

/// Where a polling exchange stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Exchange {
    /// The master may poll.
    Idle,
    /// The slave with role `slave` may start its answer before `until`.
    Polled { slave: usize, until: u64 },
}

/// What the last decision granted.
#[derive(Clone, Copy, Debug)]
enum Grant {
    Poll,
    Answer,
}

pub struct MasterSlaveArbiter {
    /// The master (role 0) and the slaves, each once.
    ports: Roles,
    /// The slaves' roles in polling order.
    poll: Vec<usize>,
    /// The place in `poll` of the next poll.
    next: usize,
    timeout_ns: u64,
    exchange: Exchange,
    /// This decision's candidate of each role: member slot.
    candidates: Vec<Option<usize>>,
    granted: Option<Grant>,
    rates: Rates,
}

impl MasterSlaveArbiter {
    pub fn new(config: &MasterSlaveConfig) -> Self {
        let mut names = vec![config.master.clone()];
        let mut poll = Vec::with_capacity(config.poll.len());
        for slave in &config.poll {
            let role = match names.iter().position(|n| n == slave) {
                Some(role) => role,
                None => {
                    names.push(slave.clone());
                    names.len() - 1
                }
            };
            poll.push(role);
        }
        Self {
            candidates: vec![None; names.len()],
            ports: Roles::new(names),
            poll,
            next: 0,
            timeout_ns: config.response_timeout_us * 1_000,
            exchange: Exchange::Idle,
            granted: None,
            rates: Rates::default(),
        }
    }

    pub fn roles(&mut self) -> &mut Roles {
        &mut self.ports
    }

    /// Why `port` may not send, if it may not: it is neither the master nor
    /// a slave the master polls.
    pub fn refuses(&self, port: PortId) -> Option<String> {
        self.ports.of(port).is_none().then(|| {
            let names = self.ports.names();
            format!(
                "is neither this channel's master ({}) nor a slave it polls ({})",
                names[MASTER],
                names[MASTER + 1..].join(", ")
            )
        })
    }
}

impl Arbiter for MasterSlaveArbiter {
    fn open(&mut self, _at: u64, rates: Rates) {
        self.rates = rates;
        self.candidates.fill(None);
        self.granted = None;
    }

    fn consider(&mut self, candidate: Candidate<'_>) {
        // Frames of ports without a role were refused as they came.
        if let Some(role) = self.ports.of(candidate.port) {
            self.candidates[role] = Some(candidate.index);
        }
    }

    fn decide(&mut self, at: u64) -> (Option<usize>, Option<u64>) {
        if let Exchange::Polled { slave, until } = self.exchange {
            if at >= until {
                // Unanswered: the master goes on.
                self.exchange = Exchange::Idle;
            } else if let Some(index) = self.candidates[slave] {
                self.granted = Some(Grant::Answer);
                return (Some(index), None);
            } else {
                return (None, Some(until));
            }
        }
        match self.candidates[MASTER] {
            Some(index) => {
                self.granted = Some(Grant::Poll);
                (Some(index), None)
            }
            None => (None, None),
        }
    }

    fn started(&mut self, at: u64, frame: &Frame) {
        match self.granted.take() {
            Some(Grant::Poll) => {
                let slave = self.poll[self.next];
                self.next = (self.next + 1) % self.poll.len();
                let until = at + self.rates.duration_ns(frame) + self.timeout_ns;
                self.exchange = Exchange::Polled { slave, until };
            }
            Some(Grant::Answer) => self.exchange = Exchange::Idle,
            None => {}
        }
    }
}

/// Check `[channel.master_slave]`; the error names the key.
pub(super) fn check(config: &MasterSlaveConfig) -> Result<(), (&'static str, String)> {
    check_port_name(&config.master).map_err(|m| ("master_slave.master", m))?;
    if config.poll.is_empty() {
        return Err(("master_slave.poll", "the master needs at least one slave to poll: poll = [\"…\", …]".into()));
    }
    for name in &config.poll {
        check_port_name(name).map_err(|m| ("master_slave.poll", m))?;
        if *name == config.master {
            return Err(("master_slave.poll", format!("'{name}' is the master; the master does not poll itself")));
        }
    }
    let timeout = config.response_timeout_us;
    if timeout == 0 || timeout > MAX_TURN_US {
        return Err(("master_slave.response_timeout_us", format!("{timeout} is not 1..={MAX_TURN_US} µs")));
    }
    Ok(())
}
