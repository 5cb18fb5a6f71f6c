//! Access rules: which pending frame a channel carries next, and when.
//!
//! A channel asks its rule at each bus-idle point (the end of the previous
//! frame on a `timed` channel, every service on an `ideal` one). The channel
//! first finds each port's eligible frame — its oldest, arrived by then, not
//! waiting out a failed attempt, bus-off or its rate limit — and hands those
//! candidates to the rule ([`Arbiter::consider`]); the rule names the winner
//! or the earliest bus time one of them may go ([`Arbiter::decide`]), and
//! hears when the winner starts ([`Arbiter::started`]). Rules keep their
//! state in bus time only, so a schedule is the same in real and virtual
//! time and when the bus thread wakes late.
//!
//! The rules, a module each: `can` (ISO 11898 priority), `tdma` (static
//! slots), `token` (a token ring), `master_slave` (a master polling
//! slaves) and `lin` (the LIN master's schedule table, the rule of every
//! `protocol = "lin"` channel). A channel holds its rule in
//! [`Rule`], an enum chosen once when the channel is made: the frame path
//! dispatches with one predictable branch, nothing is boxed, and the `can`
//! arm inlines into the loop exactly as the rule was before it had a trait.
//!
//! Rules that give the bus to named ports (`tdma`, `token`, `master-slave`)
//! learn which port has which name when it is opened ([`Rule::name_port`],
//! kept in `roles`); a port they give
//! no turn, or a frame longer than any turn, is refused as it comes
//! ([`Rule::refuses`]), so every frame a rule accepts goes out in time.

mod can;
mod lin;
mod lin_check;
#[cfg(test)]
mod lin_event_tests;
#[cfg(test)]
mod lin_sleep_tests;
mod lin_standing;
#[cfg(test)]
mod lin_standing_tests;
mod lin_table;
#[cfg(test)]
mod lin_tests;
mod master_slave;
mod roles;
mod tdma;
#[cfg(test)]
mod tests;
mod token;

use fieldhub_proto::bits::{FrameBits, RawShape};
use fieldhub_proto::{Frame, FrameKind};

use crate::config::{Arbitration, ChannelConfig, Protocol};
use crate::port_id::PortId;
use crate::tx_queue::Pending;
pub use can::PriorityArbiter;
pub use lin::{LinPower, LinScheduleArbiter, PowerNews};
pub use master_slave::MasterSlaveArbiter;
use roles::Roles;
pub use tdma::TdmaArbiter;
pub use token::TokenArbiter;

/// What a channel times its frames with at the moment of a decision: its
/// bitrates and its raw frames' bit model.
#[derive(Clone, Copy, Debug, Default)]
pub struct Rates {
    pub nominal: u32,
    /// CAN FD frames' data phase (with BRS).
    pub data: u32,
    /// CAN XL frames' data phase.
    pub xl_data: u32,
    /// Raw frames' length on the wire.
    pub raw: RawShape,
}

impl Rates {
    /// `frame`'s bit stream on this channel.
    pub fn bits(self, frame: &Frame) -> FrameBits {
        match frame.kind() {
            FrameKind::Raw => self.raw.bits(frame.len()),
            _ => FrameBits::of(frame),
        }
    }

    /// Time on the wire of `frame` at these rates.
    pub fn duration_ns(self, frame: &Frame) -> u64 {
        self.busy(frame).1
    }

    /// `frame`'s bit stream and its time on the wire: an XL frame's data
    /// phase at the XL data bitrate, an FD frame's at the data bitrate.
    #[inline]
    pub fn busy(self, frame: &Frame) -> (FrameBits, u64) {
        let bits = self.bits(frame);
        let data = if frame.kind() == FrameKind::CanXl { self.xl_data } else { self.data };
        (bits, bits.duration_ns(self.nominal, data))
    }
}

/// One port's eligible frame at a decision point.
#[derive(Clone, Copy, Debug)]
pub struct Candidate<'a> {
    /// The port's slot among the channel's members.
    pub index: usize,
    pub port: PortId,
    pub pending: &'a Pending,
}

/// An access rule. Calls come in rounds: [`open`](Self::open), one
/// [`consider`](Self::consider) per candidate in member order, then
/// [`decide`](Self::decide); a winner the channel puts on the wire is told
/// with [`started`](Self::started).
pub trait Arbiter {
    /// A decision at bus time `at` begins.
    fn open(&mut self, at: u64, rates: Rates);
    /// One port's eligible frame.
    fn consider(&mut self, candidate: Candidate<'_>);
    /// The winning member's slot, or else the earliest bus time after `at`
    /// at which one of the candidates may go (`None`: not before something
    /// else changes).
    fn decide(&mut self, at: u64) -> (Option<usize>, Option<u64>);
    /// The winner of the last decision, `frame`, starts at `at`.
    fn started(&mut self, at: u64, frame: &Frame);
}

/// A channel's rule, chosen once when the channel is made.
pub enum Rule {
    Can(PriorityArbiter),
    Tdma(TdmaArbiter),
    Token(TokenArbiter),
    MasterSlave(MasterSlaveArbiter),
    /// Boxed: its tables and the frames it holds make it several times the
    /// size of the others, which every channel would otherwise carry.
    Lin(Box<LinScheduleArbiter>),
}

impl Rule {
    /// The rule `config` names; its settings were checked by
    /// [`check_arbitration`].
    pub fn new(config: &ChannelConfig) -> Self {
        if let (Protocol::Lin, Some(lin)) = (config.protocol, &config.lin) {
            return Self::Lin(Box::new(LinScheduleArbiter::new(lin)));
        }
        match (config.arbitration, &config.tdma, &config.token, &config.master_slave) {
            (Arbitration::Tdma, Some(tdma), _, _) => Self::Tdma(TdmaArbiter::new(tdma)),
            (Arbitration::Token, _, Some(token), _) => Self::Token(TokenArbiter::new(token)),
            (Arbitration::MasterSlave, _, _, Some(polling)) => Self::MasterSlave(MasterSlaveArbiter::new(polling)),
            _ => Self::Can(PriorityArbiter::default()),
        }
    }

    /// The named ports of a rule that gives turns by name.
    fn roles(&mut self) -> Option<&mut Roles> {
        match self {
            Self::Can(_) => None,
            Self::Lin(rule) => Some(rule.roles()),
            Self::Tdma(rule) => Some(rule.roles()),
            Self::Token(rule) => Some(rule.roles()),
            Self::MasterSlave(rule) => Some(rule.roles()),
        }
    }

    /// The port `port` is named `name` on this channel.
    pub fn name_port(&mut self, port: PortId, name: &str) {
        if let Some(roles) = self.roles() {
            roles.name_port(port, name);
        }
    }

    /// The port `port` left the channel.
    pub fn forget_port(&mut self, port: PortId) {
        if let Self::Lin(rule) = self {
            rule.forget_standing(port);
            // Its sender is gone with the port: nobody to tell.
            let _ = rule.forget_pulses(port);
        }
        if let Some(roles) = self.roles() {
            roles.forget_port(port);
        }
    }

    /// Member slot `index` (port `port`) may send at this decision: on a
    /// LIN channel its standing response may answer the slot. Called for
    /// every such member before its candidate, if it has one.
    #[inline]
    pub fn eligible(&mut self, index: usize, port: PortId) {
        if let Self::Lin(rule) = self {
            rule.eligible(index, port);
        }
    }

    /// The frame a LIN rule answered the last decision with (a standing
    /// response, a repeated wake-up pulse), which goes on the bus instead of
    /// the winner's oldest frame.
    #[inline]
    pub fn take_answer(&mut self) -> Option<Frame> {
        match self {
            Self::Lin(rule) => rule.take_answer(),
            _ => None,
        }
    }

    /// Why port `port` may not send `frame` under this rule, if it may not:
    /// it has no turn, or the frame is longer than any turn it has.
    pub fn refuses(&self, port: PortId, frame: &Frame, rates: Rates) -> Option<String> {
        match self {
            Self::Can(_) => None,
            Self::Tdma(rule) => rule.refuses(port, rates.duration_ns(frame)),
            Self::Token(rule) => rule.refuses(port, rates.duration_ns(frame)),
            Self::MasterSlave(rule) => rule.refuses(port),
            Self::Lin(rule) => rule.refuses(port, frame, rates),
        }
    }

    /// Headers of a LIN schedule nobody answered and event-triggered
    /// headers whose answers collided (`None`: not a LIN channel).
    pub fn lin_counts(&self) -> Option<(u64, u64)> {
        match self {
            Self::Lin(rule) => Some((rule.no_responses, rule.collisions)),
            _ => None,
        }
    }

    /// Make the winner's frame what goes on the bus: as it waited, except a
    /// LIN answer to an event-triggered header, which goes out under that
    /// header's identifier.
    #[inline]
    pub fn carry(&mut self, frame: &mut Frame) {
        // In place: every other rule carries the frame as it waited, and a
        // frame moved in and out here was two copies on every frame's way.
        if let Self::Lin(rule) = self {
            rule.carry(frame);
        }
    }

    /// A LIN channel's state and its sleep and wake-up counts.
    pub fn lin_power(&self) -> Option<LinPower> {
        match self {
            Self::Lin(rule) => Some(rule.power()),
            _ => None,
        }
    }

    /// The LIN schedule, on a `protocol = "lin"` channel.
    pub fn lin(&mut self) -> Option<&mut LinScheduleArbiter> {
        match self {
            Self::Lin(rule) => Some(rule),
            _ => None,
        }
    }
}

impl Arbiter for Rule {
    #[inline]
    fn open(&mut self, at: u64, rates: Rates) {
        match self {
            Self::Can(rule) => rule.open(at, rates),
            Self::Tdma(rule) => rule.open(at, rates),
            Self::Token(rule) => rule.open(at, rates),
            Self::MasterSlave(rule) => rule.open(at, rates),
            Self::Lin(rule) => rule.open(at, rates),
        }
    }

    #[inline]
    fn consider(&mut self, candidate: Candidate<'_>) {
        match self {
            Self::Can(rule) => rule.consider(candidate),
            Self::Tdma(rule) => rule.consider(candidate),
            Self::Token(rule) => rule.consider(candidate),
            Self::MasterSlave(rule) => rule.consider(candidate),
            Self::Lin(rule) => rule.consider(candidate),
        }
    }

    #[inline]
    fn decide(&mut self, at: u64) -> (Option<usize>, Option<u64>) {
        match self {
            Self::Can(rule) => rule.decide(at),
            Self::Tdma(rule) => rule.decide(at),
            Self::Token(rule) => rule.decide(at),
            Self::MasterSlave(rule) => rule.decide(at),
            Self::Lin(rule) => rule.decide(at),
        }
    }

    #[inline]
    fn started(&mut self, at: u64, frame: &Frame) {
        match self {
            Self::Can(rule) => rule.started(at, frame),
            Self::Tdma(rule) => rule.started(at, frame),
            Self::Token(rule) => rule.started(at, frame),
            Self::MasterSlave(rule) => rule.started(at, frame),
            Self::Lin(rule) => rule.started(at, frame),
        }
    }
}

/// Longest slot or hold accepted: 1,000 s, so cycle arithmetic in
/// nanoseconds cannot overflow.
const MAX_TURN_US: u64 = 1_000_000_000;

/// Check a channel's access rule against its settings table; the error
/// names the offending key.
pub fn check_arbitration(config: &ChannelConfig) -> Result<(), (&'static str, String)> {
    let rule = config.arbitration.name();
    match (config.protocol == Protocol::Lin, &config.lin) {
        (true, None) => {
            return Err(("lin", "protocol = \"lin\" needs a [channel.lin] table with its schedule".into()));
        }
        (false, Some(_)) => return Err(("lin", "a [channel.lin] table needs protocol = \"lin\"".into())),
        (true, Some(_)) if config.arbitration != Arbitration::Can => {
            let text = format!("a LIN channel's master runs its schedule table; leave out arbitration = \"{rule}\"");
            return Err(("arbitration", text));
        }
        (true, Some(_)) if config.federated => {
            return Err(("federated", "a LIN channel is local to one hub".into()));
        }
        _ => {}
    }
    // Each rule but `can` and its table: both or neither.
    let tables = [
        (Arbitration::Tdma, "tdma", config.tdma.is_some(), "its slots"),
        (Arbitration::Token, "token", config.token.is_some(), "its order"),
        (Arbitration::MasterSlave, "master_slave", config.master_slave.is_some(), "its master and poll order"),
    ];
    for (arbitration, key, present, what) in tables {
        match (config.arbitration == arbitration, present) {
            (true, false) => {
                let name = arbitration.name();
                return Err((key, format!("arbitration = \"{name}\" needs a [channel.{key}] table with {what}")));
            }
            (false, true) => {
                let name = arbitration.name();
                return Err((key, format!("a [channel.{key}] table needs arbitration = \"{name}\", not \"{rule}\"")));
            }
            _ => {}
        }
    }
    if config.arbitration != Arbitration::Can && config.federated {
        let text = format!("a federated channel uses arbitration = \"can\"; \"{rule}\" channels are local to one hub");
        return Err(("arbitration", text));
    }
    if let Some(tdma) = &config.tdma {
        tdma::check(tdma)?;
    }
    if let Some(token) = &config.token {
        token::check(token)?;
    }
    if let Some(polling) = &config.master_slave {
        master_slave::check(polling)?;
    }
    if let Some(lin) = &config.lin {
        lin_check::check(lin)?;
    }
    Ok(())
}

/// Whether a gateway route may send into a channel with `config`: only
/// under `can`, since other rules give turns to named ports and a route's
/// sending end has no name.
pub fn check_route_into(config: &ChannelConfig) -> Result<(), String> {
    if config.protocol == Protocol::Lin {
        return Err(format!(
            "a route cannot send into channel '{}': it is a LIN channel, whose slaves publish responses from their ports; \
             map CAN frames onto its responses with a [[gateway]] (docs/buses.md)",
            config.name
        ));
    }
    match config.arbitration {
        Arbitration::Can => Ok(()),
        rule => Err(format!(
            "a route cannot send into channel '{}': arbitration = \"{}\" gives bus time to named ports only",
            config.name,
            rule.name()
        )),
    }
}

/// Check a port name a rule gives turns to.
fn check_port_name(name: &str) -> Result<(), String> {
    crate::names::check_name(name).map_err(|why| format!("port name {why}"))
}
