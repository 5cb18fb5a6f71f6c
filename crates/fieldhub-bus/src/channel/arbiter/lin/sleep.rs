//! A LIN channel's sleep and wake-up, run by the master — the hub — on bus
//! time. The figures are LIN 2.1's §2.6.2–2.6.3 as Vector's "LIN network
//! management" page and elektroniknet's summary of LIN 2.1 state them.
//!
//! - **Go-to-sleep**: the master request frame 0x3C with data
//!   `00 FF FF FF FF FF FF FF` ([`Frame::lin_go_to_sleep`]). A port sends it
//!   like a response — it waits in the port's FIFO behind the port's earlier
//!   frames —, the control API asks the hub for its own; either goes on the
//!   bus at the next slot boundary in place of that slot, and from its start
//!   the master sends no header. The channel is asleep from the frame's end
//!   (`CHANNEL_STATE` `asleep`).
//! - **Bus idle**: with a port on the channel and nothing on the bus for
//!   `idle_timeout_ms` (LIN 2.1: 4 to 10 s; default 4 s) the channel is
//!   asleep. A running schedule's headers keep the bus busy, so only a
//!   schedule whose every slot stays silent (sporadic frames nobody has
//!   pending) falls idle; a channel without ports has no node to sleep, and
//!   its state stands still until one opens.
//! - **Wake-up**: a pulse ([`Frame::lin_wake_up`], 5 dominant bit times,
//!   250 µs to 5 ms at every LIN bitrate) from a port, or the master's
//!   through the control API, wakes a sleeping channel at the pulse's end
//!   (`CHANNEL_STATE` `awake`); the master's first header — the schedule's
//!   first slot, the schedule starting over — starts `wake_delay_ms`
//!   (default 100: LIN 2.1's slaves are ready within 100 ms) after it. A
//!   port's pulse goes on the bus as soon as the bus reads it: it never
//!   waits in the port's FIFO behind responses the sleep holds back, and
//!   takes no transmit credit ([`LinScheduleArbiter::ask_pulse`]). If
//!   no header starts within `wake_retry_ms` (LIN 2.1: 150 to 250 ms) of a
//!   pulse's end, the hub sends the waker's next pulse for it — a frame from
//!   its port that takes no transmit credit —; after three it waits 1.5 s
//!   from the third's end and begins again, for as long as no header comes.
//!   Pulses of other ports while the master wakes move nothing.
//! - While the channel sleeps, one-shot responses are refused as they come
//!   ([`LinScheduleArbiter::power_refuses`]); standing responses are kept
//!   (a sleeping slave keeps its response buffer), and responses queued
//!   before the sleep answer their identifiers' slots after the wake-up.

use std::collections::VecDeque;

use fieldhub_proto::fate::ChannelCondition;
use fieldhub_proto::Frame;

use super::{Grant, LinScheduleArbiter};
use crate::config::LinConfig;
use crate::port_id::PortId;

const MS: u64 = 1_000_000;
/// LIN 2.1 §2.6.2: after three pulses without a header, a waker waits at
/// least 1.5 s before its fourth.
const PAUSE_AFTER_THREE_NS: u64 = 1_500 * MS;

/// Where the channel is in its sleep cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Power {
    Awake,
    Asleep,
    /// Woken by a pulse: the master's first header is due at `headers_at`.
    Waking {
        headers_at: u64,
    },
}

/// The port whose wake-up pulses repeat until a header comes.
#[derive(Clone, Copy, Debug)]
struct Waker {
    port: PortId,
    /// Pulses sent since the last pause.
    pulses: u32,
    next_at: u64,
}

/// A change of the channel's state at bus time `at`, which its ports are
/// told of (`CHANNEL_STATE`) in order with its frames.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PowerNews {
    pub at: u64,
    pub condition: ChannelCondition,
    pub text: String,
}

/// A LIN channel's state, as `fieldhub ctl channels` shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinPower {
    /// `"awake"`, `"asleep"` or `"waking"` (woken, the master's first header
    /// not yet sent).
    pub state: &'static str,
    /// Times the channel fell asleep.
    pub sleeps: u64,
    /// Wake-up pulses on the bus.
    pub wake_ups: u64,
}

pub(super) struct Sleep {
    pub(super) power: Power,
    /// The end of the last thing on the bus: bus idle counts from it.
    pub(super) active_until: u64,
    idle_ns: u64,
    delay_ns: u64,
    retry_ns: u64,
    waker: Option<Waker>,
    /// The control API's go-to-sleep, due from this bus time on.
    sleep_asked: Option<u64>,
    /// Wake-up pulses asked for, in order: from a port, or the master's
    /// (`None`), each due from its bus time on.
    pulse_asks: VecDeque<(Option<PortId>, u64)>,
    news: VecDeque<PowerNews>,
    sleeps: u64,
    wake_ups: u64,
}

impl Sleep {
    pub(super) fn new(config: &LinConfig) -> Self {
        Self {
            power: Power::Awake,
            active_until: 0,
            idle_ns: config.idle_timeout_ms * MS,
            delay_ns: config.wake_delay_ms * MS,
            retry_ns: config.wake_retry_ms * MS,
            waker: None,
            sleep_asked: None,
            pulse_asks: VecDeque::new(),
            news: VecDeque::new(),
            sleeps: 0,
            wake_ups: 0,
        }
    }

    /// When the bus falls idle if nothing goes on it before.
    pub(super) fn idle_at(&self) -> u64 {
        self.active_until.saturating_add(self.idle_ns)
    }

    /// The port whose pulse is due at `at`, if one is: the first asked
    /// for, else the waker's repeat.
    pub(super) fn port_pulse_due(&self, at: u64) -> Option<PortId> {
        match self.pulse_asks.front() {
            Some(&(port, asked)) if at >= asked => port,
            _ => self.waker.filter(|w| at >= w.next_at).map(|w| w.port),
        }
    }

    /// The pulse asked for first, once due at `at`; `Err` with its time
    /// while it is not.
    fn pulse_ask_due(&self, at: u64) -> Option<Result<Option<PortId>, u64>> {
        self.pulse_asks.front().map(|&(port, asked)| if at >= asked { Ok(port) } else { Err(asked) })
    }

    /// Something went on the bus until `end`.
    pub(super) fn active(&mut self, end: u64) {
        self.active_until = self.active_until.max(end);
    }

    fn tell(&mut self, at: u64, condition: ChannelCondition, text: String) {
        self.news.push_back(PowerNews { at, condition, text });
    }
}

impl LinScheduleArbiter {
    /// The channel's state and its sleep and wake-up counts.
    pub fn power(&self) -> LinPower {
        let state = match self.sleep.power {
            Power::Awake => "awake",
            Power::Asleep => "asleep",
            Power::Waking { .. } => "waking",
        };
        LinPower { state, sleeps: self.sleep.sleeps, wake_ups: self.sleep.wake_ups }
    }

    /// The control API asks the master for the go-to-sleep command at bus
    /// time `now`: it goes out at the next slot boundary.
    pub fn ask_sleep(&mut self, now: u64) -> Result<(), String> {
        match (self.sleep.power, self.sleep.sleep_asked) {
            (Power::Asleep, _) => Err("is asleep already; wake it first (fieldhub ctl lin wake)".into()),
            (_, Some(_)) => Err("has a go-to-sleep command waiting for the next slot boundary already".into()),
            _ => {
                self.sleep.sleep_asked = Some(now);
                Ok(())
            }
        }
    }

    /// The control API asks the master to wake the sleeping channel at bus
    /// time `now`: its pulse goes on the bus at once.
    pub fn ask_wake(&mut self, now: u64) -> Result<(), String> {
        match self.sleep.power {
            Power::Asleep if self.sleep.pulse_asks.is_empty() => {
                self.sleep.pulse_asks.push_back((None, now));
                Ok(())
            }
            Power::Asleep => Err("has a wake-up pulse waiting already".into()),
            Power::Awake => Err("is awake; a wake-up pulse wakes a sleeping LIN bus".into()),
            Power::Waking { .. } => {
                Err("is waking already: the master's schedule resumes after its wake-up delay".into())
            }
        }
    }

    /// Port `port` sends a wake-up pulse, read at bus time `now` (refused
    /// before on an awake channel, `power_refuses`): it goes on the
    /// bus at once, from the port, taking no credit.
    pub fn ask_pulse(&mut self, port: PortId, now: u64) {
        self.sleep.pulse_asks.push_back((Some(port), now));
    }

    /// `port` left the channel, or its cable was pulled: its pulses that
    /// have not gone on the bus go with it, and it repeats none. Returns
    /// how many pulses went, for its sender to be told.
    pub fn forget_pulses(&mut self, port: PortId) -> usize {
        let asked = self.sleep.pulse_asks.len();
        self.sleep.pulse_asks.retain(|&(asker, _)| asker != Some(port));
        if self.sleep.waker.is_some_and(|w| w.port == port) {
            self.sleep.waker = None;
        }
        asked - self.sleep.pulse_asks.len()
    }

    /// Whether a pulse port `port` asked for has not gone on the bus yet.
    pub fn pulse_waits(&self, port: PortId) -> bool {
        self.sleep.pulse_asks.iter().any(|&(asker, _)| asker == Some(port))
    }

    /// The next change of state before bus time `until` (at it too with
    /// `inclusive`), for the channel to tell its ports.
    pub fn take_news(&mut self, until: u64, inclusive: bool) -> Option<PowerNews> {
        let due = self.sleep.news.front().is_some_and(|n| n.at < until || (inclusive && n.at == until));
        due.then(|| self.sleep.news.pop_front()).flatten()
    }

    /// Why `frame` may not be sent now for the channel's state, if it may not.
    pub(super) fn power_refuses(&self, frame: &Frame) -> Option<String> {
        let asleep = self.sleep.power == Power::Asleep;
        if frame.is_lin_wake_up() {
            return (self.sleep.power == Power::Awake).then(|| {
                "sends a wake-up pulse while the channel is awake; a pulse wakes a sleeping LIN bus (after a \
                 go-to-sleep command or the bus-idle timeout)"
                    .into()
            });
        }
        if frame.is_lin_go_to_sleep() {
            if *frame != Frame::lin_go_to_sleep() {
                return Some(format!(
                    "sends {frame:?}, a master request whose first byte 0 makes it the go-to-sleep command, which is \
                     00 FF FF FF FF FF FF FF under the classic checksum (L3C#00FFFFFFFFFFFFFF/C)"
                ));
            }
            return asleep.then(|| "sends the go-to-sleep command while the channel is asleep already".into());
        }
        (asleep && !frame.is_lin_standing()).then(|| {
            "publishes a response while the channel is asleep; wake it first with a wake-up pulse (LW#-), or \
             stand for the identifier (a sleeping slave keeps its standing responses)"
                .into()
        })
    }

    /// What the channel's state decides at bus time `at` before the
    /// schedule's slot does: a wake-up pulse, a repeated one, falling idle,
    /// the master's first header after a wake-up. `None`: the slot decides.
    pub(super) fn decide_power(&mut self, at: u64) -> Option<(Option<usize>, Option<u64>)> {
        let asked = match self.sleep.pulse_ask_due(at) {
            // Asleep, a pulse goes at once; awake (the bus woke before the
            // pulse was due), in the gap before the next slot, which a
            // slave takes for a break too short.
            Some(Ok(port)) => {
                let pulse_ns = self.rates.duration_ns(&Frame::lin_wake_up());
                let fits = self.sleep.power != Power::Awake || self.slot_at.is_none_or(|slot| at + pulse_ns <= slot);
                // A port that cannot send now (off the channel while it
                // lingers in virtual time, unplugged, bus-off) sends its
                // pulse once it can; a port that leaves takes it along.
                let sends = port.is_none() || self.answers.pulse.is_some();
                if fits && sends {
                    return Some(self.asked_pulse(at, port));
                }
                None
            }
            Some(Err(due)) => Some(due),
            None => None,
        };
        match self.sleep.power {
            Power::Awake => {
                let (slot, idle) = (self.slot_at?, self.sleep.idle_at());
                if at >= idle && idle < slot {
                    let text = format!("fell asleep: nothing on the bus for {} ms", self.sleep.idle_ns / MS);
                    self.fall_asleep(idle, text);
                    return Some((None, None));
                }
                None
            }
            Power::Asleep => Some((None, asked)),
            Power::Waking { headers_at } => {
                if at >= headers_at && self.running {
                    // The schedule starts over; the slot is decided anew at
                    // `headers_at`, with its answers.
                    self.sleep.power = Power::Awake;
                    self.sleep.waker = None;
                    self.sleep.active(headers_at);
                    self.slot_at = Some(headers_at);
                    self.next = 0;
                    self.resolving = None;
                    return Some((None, Some(headers_at)));
                }
                if let Some(waker) = self.sleep.waker.filter(|w| at >= w.next_at) {
                    match self.answers.pulse.filter(|_| self.answers.pulse_port == Some(waker.port)) {
                        Some(index) => {
                            self.answer_won = Some(Frame::lin_wake_up());
                            self.granted = Some(Grant::Pulse(waker.port));
                            return Some((Some(index), None));
                        }
                        // The waker cannot send now: it repeats no more.
                        None => self.sleep.waker = None,
                    }
                }
                let headers = self.running.then_some(headers_at);
                let repeat = self.sleep.waker.map(|w| w.next_at);
                Some((None, [headers, repeat, asked].into_iter().flatten().min()))
            }
        }
    }

    /// The pulse asked for first, due at `at`, goes on the bus: the
    /// master's as the bus's own frame, a port's as a frame of that port.
    fn asked_pulse(&mut self, at: u64, port: Option<PortId>) -> (Option<usize>, Option<u64>) {
        self.sleep.pulse_asks.pop_front();
        let Some(port) = port else {
            self.own(Frame::lin_wake_up(), at);
            self.pulse_started(at, None);
            return (None, self.own_frame.as_ref().map(|(_, end)| *end));
        };
        self.answer_won = Some(Frame::lin_wake_up());
        self.granted = Some(Grant::Pulse(port));
        (self.answers.pulse, None)
    }

    /// At a slot boundary `at`: the go-to-sleep command, a port's or the
    /// control API's, goes out instead of the slot. `None`: the slot runs.
    pub(super) fn sleep_at_boundary(&mut self, at: u64) -> Option<(Option<usize>, Option<u64>)> {
        if let Some(index) = self.answers.sleep {
            self.granted = Some(Grant::Sleep);
            return Some((Some(index), None));
        }
        if self.sleep.sleep_asked.is_none_or(|asked| asked > at) {
            return None;
        }
        self.own(Frame::lin_go_to_sleep(), at);
        let end = self.own_frame.as_ref().map_or(at, |(_, end)| *end);
        self.fall_asleep(end, "fell asleep: the master's go-to-sleep command".into());
        Some((None, Some(end)))
    }

    /// A wake-up pulse from `port` (`None`: the master's) starts at `at`.
    pub(super) fn pulse_started(&mut self, at: u64, port: Option<PortId>) {
        let end = at + self.rates.duration_ns(&Frame::lin_wake_up());
        self.sleep.wake_ups += 1;
        match self.sleep.power {
            Power::Asleep => self.woken(end, port, if port.is_some() { "a port's" } else { "the master's" }),
            Power::Waking { .. } => {
                let retry = self.sleep.retry_ns;
                if let Some(waker) = self.sleep.waker.as_mut().filter(|w| Some(w.port) == port) {
                    waker.pulses += 1;
                    let pause = if waker.pulses == 3 { PAUSE_AFTER_THREE_NS } else { retry };
                    waker.pulses %= 3;
                    waker.next_at = end + pause;
                }
            }
            Power::Awake => {}
        }
    }

    /// The go-to-sleep command of a port starts at `at` and lasts `ns`.
    pub(super) fn sleep_started(&mut self, at: u64, ns: u64) {
        self.fall_asleep(at + ns, "fell asleep: a port's go-to-sleep command".into());
    }

    /// The channel starts or stops its schedule (`running`: a port is on
    /// it) at `now`: only an awake channel runs it.
    pub(super) fn may_run(&mut self, now: u64, running: bool) -> bool {
        self.running = running;
        match self.sleep.power {
            Power::Awake => {
                if running && self.slot_at.is_none() {
                    // Bus idle counts from the schedule's start.
                    self.sleep.active(now);
                }
                true
            }
            // Its nodes come back to a waking channel now at the earliest.
            Power::Waking { headers_at } if running && headers_at < now => {
                self.sleep.power = Power::Waking { headers_at: now };
                false
            }
            _ => false,
        }
    }

    /// No header from the go-to-sleep command's start on; asleep at `end`.
    fn fall_asleep(&mut self, end: u64, text: String) {
        self.sleep.power = Power::Asleep;
        self.sleep.sleeps += 1;
        self.sleep.waker = None;
        self.sleep.sleep_asked = None;
        self.slot_at = None;
        self.resolving = None;
        self.sleep.tell(end, ChannelCondition::Asleep, text);
    }

    /// A pulse ending at `end` woke the channel; `port` repeats it until a
    /// header comes (the master, `None`, sends its headers itself).
    fn woken(&mut self, end: u64, port: Option<PortId>, whose: &str) {
        let headers_at = end + self.sleep.delay_ns;
        self.sleep.power = Power::Waking { headers_at };
        self.sleep.waker = port.map(|port| Waker { port, pulses: 1, next_at: end + self.sleep.retry_ns });
        let text = format!(
            "woke: {whose} wake-up pulse ended at {end} ns bus time; the master's schedule resumes at {headers_at} ns"
        );
        self.sleep.tell(end, ChannelCondition::Awake, text);
    }
}
