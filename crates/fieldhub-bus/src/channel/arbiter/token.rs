//! `token`: a token ring. The token visits named ports in a configured
//! order; the port holding it sends its oldest frames, up to `max_frames`
//! per visit and each ending within `hold_us` of the visit's start, then the
//! token moves on. A port with nothing to send when the token would come is
//! passed over, and passing takes no bus time, so the token rotation time
//! is the sum of the visits: with every port busy, n × (the frames of one
//! visit). The visit starts with the holder's first frame.

use fieldhub_proto::Frame;

use super::roles::Roles;
use super::{check_port_name, Arbiter, Candidate, Rates, MAX_TURN_US};
use crate::config::TokenConfig;
use crate::port_id::PortId;

/// Most frames one visit may allow.
const MAX_FRAMES_PER_VISIT: u32 = 1_000_000;

pub struct TokenArbiter {
    /// The ring's port names in order (a role is a position on the ring),
    /// and the open ports with them.
    order: Roles,
    hold_ns: u64,
    max_frames: u32,
    /// This decision's candidate at each position: member slot and duration.
    candidates: Vec<Option<(usize, u64)>>,
    /// Position of the port holding the token.
    holder: usize,
    /// Bus time the holder's visit started.
    visit_start: u64,
    /// Frames the holder has sent in this visit.
    sent: u32,
    /// Bus time the holder's last frame ends (`ideal` channels spend none,
    /// but the visit still counts each frame's time).
    busy_until: u64,
    /// The position the last decision granted, and whether the token moves
    /// there (a new visit) when its frame starts.
    granted: Option<(usize, bool)>,
    rates: Rates,
}

impl TokenArbiter {
    pub fn new(config: &TokenConfig) -> Self {
        Self {
            order: Roles::new(config.order.clone()),
            hold_ns: config.hold_us * 1_000,
            max_frames: config.max_frames,
            candidates: vec![None; config.order.len()],
            // The first frame's sender takes the token from the last port.
            holder: config.order.len() - 1,
            visit_start: 0,
            sent: config.max_frames,
            busy_until: 0,
            granted: None,
            rates: Rates::default(),
        }
    }

    pub fn roles(&mut self) -> &mut Roles {
        &mut self.order
    }

    /// Why `port` may not send a frame lasting `duration_ns`, if it may not.
    pub fn refuses(&self, port: PortId, duration_ns: u64) -> Option<String> {
        if self.order.of(port).is_none() {
            return Some(format!("is not on this channel's token ring ({})", self.order.listed()));
        }
        (duration_ns > self.hold_ns).then(|| {
            format!(
                "sent a frame of {duration_ns} ns on the wire, longer than the token hold time ({} ns)",
                self.hold_ns
            )
        })
    }
}

impl Arbiter for TokenArbiter {
    fn open(&mut self, _at: u64, rates: Rates) {
        self.rates = rates;
        self.candidates.fill(None);
        self.granted = None;
    }

    fn consider(&mut self, candidate: Candidate<'_>) {
        // Frames of ports off the ring were refused as they came.
        if let Some(position) = self.order.of(candidate.port) {
            self.candidates[position] = Some((candidate.index, self.rates.duration_ns(&candidate.pending.frame)));
        }
    }

    fn decide(&mut self, at: u64) -> (Option<usize>, Option<u64>) {
        if let Some((index, duration_ns)) = self.candidates[self.holder] {
            let fits = at.max(self.busy_until) + duration_ns <= self.visit_start + self.hold_ns;
            if self.sent < self.max_frames && fits {
                self.granted = Some((self.holder, false));
                return (Some(index), None);
            }
        }
        // The token moves on to the next port with a frame (the holder
        // itself again, after a whole round, if it is the only one).
        let ring = self.order.names().len();
        for step in 1..=ring {
            let position = (self.holder + step) % ring;
            if let Some((index, _)) = self.candidates[position] {
                self.granted = Some((position, true));
                return (Some(index), None);
            }
        }
        (None, None)
    }

    fn started(&mut self, at: u64, frame: &Frame) {
        let Some((position, new_visit)) = self.granted.take() else { return };
        if new_visit {
            self.holder = position;
            self.visit_start = at;
            self.sent = 0;
            self.busy_until = at;
        }
        self.sent += 1;
        self.busy_until = at.max(self.busy_until) + self.rates.duration_ns(frame);
    }
}

/// Check `[channel.token]`; the error names the key.
pub(super) fn check(config: &TokenConfig) -> Result<(), (&'static str, String)> {
    if config.order.is_empty() {
        return Err(("token.order", "the token ring needs at least one port: order = [\"…\", …]".into()));
    }
    for (i, name) in config.order.iter().enumerate() {
        check_port_name(name).map_err(|m| ("token.order", m))?;
        if config.order[..i].contains(name) {
            return Err(("token.order", format!("port '{name}' is on the ring twice")));
        }
    }
    if config.hold_us == 0 || config.hold_us > MAX_TURN_US {
        return Err(("token.hold_us", format!("{} is not 1..={MAX_TURN_US} µs", config.hold_us)));
    }
    if config.max_frames == 0 || config.max_frames > MAX_FRAMES_PER_VISIT {
        return Err(("token.max_frames", format!("{} is not 1..={MAX_FRAMES_PER_VISIT}", config.max_frames)));
    }
    Ok(())
}
