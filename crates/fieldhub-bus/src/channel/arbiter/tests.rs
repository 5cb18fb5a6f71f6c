//! Each access rule's order and timing against hand-computed schedules,
//! driven like a manual clock: the channel is served exactly at the bus
//! times it asks for, and every frame's start of frame is checked.

use std::sync::Arc;

use fieldhub_proto::bits::FrameBits;
use fieldhub_proto::wire::PortOptions;
use fieldhub_proto::Frame;

use crate::channel::{Channel, Transmitted};
use crate::config::{
    Arbitration, ChannelConfig, MasterSlaveConfig, Protocol, SlotConfig, TdmaConfig, Timing, TokenConfig,
};
use crate::credit::TxCredit;
use crate::member::Member;
use crate::outbox::test_outbox;
use crate::port_id::PortId;
use crate::tx_queue::{Pending, TxQueue};

const BITRATE: u32 = 500_000;
const US: u64 = 1_000;

/// The frame every port sends: 8 data bytes, so one frame is one turn's
/// worth of bus time.
fn frame() -> Frame {
    Frame::can(0x123, false, &[0x55; 8]).unwrap()
}

/// Its time on the wire at 500 kbit/s.
fn frame_ns() -> u64 {
    FrameBits::of(&frame()).duration_ns(BITRATE, BITRATE)
}

fn port(n: u32) -> PortId {
    PortId::client(n).unwrap()
}

/// A timed 500 kbit/s channel with ports 1, 2, 3 named a, b, c.
fn channel(arbitration: Arbitration, tdma: Option<TdmaConfig>, token: Option<TokenConfig>) -> Channel {
    channel_with(ChannelConfig { arbitration, tdma, token, ..ChannelConfig::new("bus", Protocol::Can) })
}

/// `config` as a timed 500 kbit/s channel with ports 1, 2, 3 named a, b, c.
fn channel_with(config: ChannelConfig) -> Channel {
    let config = ChannelConfig { timing: Timing::Timed, bitrate: BITRATE, ..config };
    config.check_arbitration().unwrap();
    let mut channel = Channel::new(0, config);
    for (n, name) in [(1, "a"), (2, "b"), (3, "c")] {
        let (outbox, _) = test_outbox();
        let credit = Arc::new(TxCredit::for_current_thread());
        channel.members.push(Member::client(n, 0, port(n), PortOptions::empty(), outbox, credit, TxQueue::new(None)));
        channel.name_port(port(n), name);
    }
    channel
}

fn queue(channel: &mut Channel, n: u32, count: usize, arrived_ns: u64) {
    for i in 0..count {
        let arrival = u64::from(n) * 100 + i as u64;
        let pending = Pending { frame: frame(), arrival, hops: 0, arrived_ns };
        channel.member_mut(port(n)).unwrap().tx.push(pending);
    }
}

/// Serve `channel` at `from` and then at every bus time it asks for, up to
/// `until`; each frame as (sending port number, start of frame).
fn run(channel: &mut Channel, from: u64, until: u64) -> Vec<(u32, u64)> {
    let mut sent: Vec<Transmitted> = Vec::new();
    let mut now = from;
    while let Some(wake) = channel.service(now, &mut sent) {
        assert!(wake > now, "the channel asked to be served at {wake}, not after {now}");
        if wake > until {
            break;
        }
        now = wake;
    }
    let number = |id: PortId| (1..=3).find(|&n| port(n) == id).unwrap();
    sent.iter().map(|t| (number(t.sender.unwrap()), t.timestamp_ns - frame_ns())).collect()
}

fn tdma(cycle_us: Option<u64>, slots: &[(&str, u64)]) -> TdmaConfig {
    let slots = slots.iter().map(|&(port, length_us)| SlotConfig { port: port.into(), length_us }).collect();
    TdmaConfig { cycle_us, slots }
}

#[test]
fn tdma_frames_start_at_their_owners_slot_boundaries_one_per_slot_and_cycle() {
    // Cycle of 3 ms: a [0, 1 ms), b [1 ms, 2 ms), idle [2 ms, 3 ms).
    let mut channel = channel(Arbitration::Tdma, Some(tdma(Some(3_000), &[("a", 1_000), ("b", 1_000)])), None);
    queue(&mut channel, 1, 3, 0);
    queue(&mut channel, 2, 2, 0);
    let starts = run(&mut channel, 0, 10_000 * US);
    assert_eq!(starts, [(1, 0), (2, 1_000 * US), (1, 3_000 * US), (2, 4_000 * US), (1, 6_000 * US)]);
}

#[test]
fn tdma_frame_arriving_inside_its_slot_goes_at_once_if_it_fits_and_else_waits_a_cycle() {
    let mut channel = channel(Arbitration::Tdma, Some(tdma(None, &[("a", 1_000), ("b", 1_000)])), None);
    // Into a's slot with room left: it starts as it arrives.
    queue(&mut channel, 1, 1, 300 * US);
    assert_eq!(run(&mut channel, 300 * US, 1_999 * US), [(1, 300 * US)]);
    // Into b's slot too late to end within it: the next cycle's b slot.
    let late = 2_000 * US - frame_ns() / 2;
    queue(&mut channel, 2, 1, late);
    assert_eq!(run(&mut channel, late, 10_000 * US), [(2, 3_000 * US)]);
}

#[test]
fn tdma_idle_slots_are_idle_bus_time() {
    // One frame per 2 ms cycle from a; b's slot stays empty.
    let mut channel = channel(Arbitration::Tdma, Some(tdma(None, &[("a", 1_000), ("b", 1_000)])), None);
    queue(&mut channel, 1, 600, 0);
    let starts = run(&mut channel, 0, 1_000_000 * US - 1);
    assert_eq!(starts.len(), 500, "one frame per cycle for a second");
    assert!(starts.iter().enumerate().all(|(k, &(n, start))| n == 1 && start == k as u64 * 2_000 * US));
    // Busy: 500 frames in one second; the load is their time, nothing else.
    let percent = channel.load.percent(1_000_000 * US, 1_000_000 * US);
    let expected = 100.0 * (500 * frame_ns()) as f64 / 1e9;
    assert!((percent - expected).abs() < 1e-9, "load {percent} %, expected {expected} %");
}

#[test]
fn tdma_in_ideal_timing_still_gives_each_slot_one_frame() {
    let mut channel = channel(Arbitration::Tdma, Some(tdma(None, &[("a", 1_000), ("b", 1_000)])), None);
    channel.config.timing = Timing::Ideal;
    queue(&mut channel, 1, 2, 0);
    queue(&mut channel, 2, 1, 0);
    let mut sent = Vec::new();
    assert_eq!(channel.service(0, &mut sent), Some(1_000 * US), "a's second frame and b wait");
    assert_eq!(channel.service(1_000 * US, &mut sent), Some(2_000 * US));
    assert_eq!(channel.service(2_000 * US, &mut sent), None);
    let order: Vec<(Option<PortId>, u64)> = sent.iter().map(|t| (t.sender, t.timestamp_ns)).collect();
    assert_eq!(order, [(Some(port(1)), 0), (Some(port(2)), 1_000 * US), (Some(port(1)), 2_000 * US)]);
}

fn token(order: &[&str], hold_us: u64, max_frames: u32) -> TokenConfig {
    TokenConfig { order: order.iter().map(|s| (*s).into()).collect(), hold_us, max_frames }
}

#[test]
fn token_visits_ports_in_order_with_up_to_max_frames_each() {
    // Each visit: 2 frames back to back; the token rotation time with all
    // three busy is 6 frame times.
    let mut channel = channel(Arbitration::Token, None, Some(token(&["a", "b", "c"], 10_000, 2)));
    for n in 1..=3 {
        queue(&mut channel, n, 3, 0);
    }
    let d = frame_ns();
    let starts = run(&mut channel, 0, u64::MAX);
    let expected: Vec<(u32, u64)> =
        [1, 1, 2, 2, 3, 3, 1, 2, 3].iter().enumerate().map(|(k, &n)| (n, k as u64 * d)).collect();
    assert_eq!(starts, expected);
    assert_eq!(starts[6].1 - starts[0].1, 6 * d, "token rotation time");
}

#[test]
fn token_hold_time_ends_a_visit_before_max_frames() {
    // The hold fits one frame and a half: one frame per visit.
    let d = frame_ns();
    let hold_us = d * 3 / 2 / US;
    let mut channel = channel(Arbitration::Token, None, Some(token(&["c", "a", "b"], hold_us, 4)));
    for n in 1..=3 {
        queue(&mut channel, n, 2, 0);
    }
    let starts = run(&mut channel, 0, u64::MAX);
    let expected: Vec<(u32, u64)> = [3, 1, 2, 3, 1, 2].iter().enumerate().map(|(k, &n)| (n, k as u64 * d)).collect();
    assert_eq!(starts, expected);
}

#[test]
fn token_passes_over_ports_with_nothing_to_send() {
    let mut channel = channel(Arbitration::Token, None, Some(token(&["a", "b", "c"], 10_000, 1)));
    queue(&mut channel, 3, 2, 0);
    queue(&mut channel, 1, 1, 0);
    let d = frame_ns();
    // a, then c (b is empty), then c again after a whole empty round.
    assert_eq!(run(&mut channel, 0, u64::MAX), [(1, 0), (3, d), (3, 2 * d)]);
    // b's frame arriving later waits for nobody: the token goes to it.
    queue(&mut channel, 2, 1, 100 * d);
    assert_eq!(run(&mut channel, 100 * d, u64::MAX), [(2, 100 * d)]);
}

#[test]
fn rules_refuse_ports_without_a_turn_and_frames_longer_than_any_turn() {
    let tdma_channel = channel(Arbitration::Tdma, Some(tdma(None, &[("a", 1_000), ("b", 100)])), None);
    let refused = tdma_channel.arbitration_refuses(port(3), &frame()).unwrap();
    assert!(refused.contains("owns no slot") && refused.contains("a, b"), "{refused}");
    let too_long = tdma_channel.arbitration_refuses(port(2), &frame()).unwrap();
    assert!(too_long.contains("longer than its longest TDMA slot (100000 ns)"), "{too_long}");
    assert_eq!(tdma_channel.arbitration_refuses(port(1), &frame()), None);
    let ring = channel(Arbitration::Token, None, Some(token(&["a"], 100, 1)));
    assert!(ring.arbitration_refuses(port(2), &frame()).unwrap().contains("not on this channel's token ring (a)"));
    assert!(ring.arbitration_refuses(port(1), &frame()).unwrap().contains("token hold time (100000 ns)"));
}

#[test]
fn a_port_that_leaves_loses_its_turns() {
    let mut channel = channel(Arbitration::Tdma, Some(tdma(None, &[("a", 1_000)])), None);
    channel.detach(port(1));
    assert!(channel.arbitration_refuses(port(1), &frame()).is_some());
}

#[test]
fn arbitration_settings_errors_name_the_key() {
    let check = |arbitration, tdma: Option<TdmaConfig>, token: Option<TokenConfig>| {
        ChannelConfig { arbitration, tdma, token, ..ChannelConfig::new("bus", Protocol::Can) }
            .check_arbitration()
            .unwrap_err()
    };
    assert_eq!(check(Arbitration::Tdma, None, None).0, "tdma");
    assert_eq!(check(Arbitration::Can, Some(tdma(None, &[("a", 1)])), None).0, "tdma");
    assert_eq!(check(Arbitration::Token, None, None).0, "token");
    assert_eq!(check(Arbitration::Tdma, Some(tdma(None, &[])), None).0, "tdma.slots");
    let (key, text) = check(Arbitration::Tdma, Some(tdma(None, &[("a", 10), ("b", 0)])), None);
    assert_eq!((key, text.as_str()), ("tdma.slots", "slot 2 ('b'): length_us 0 is not 1..=1000000000"));
    let (key, text) = check(Arbitration::Tdma, Some(tdma(Some(15), &[("a", 10), ("b", 10)])), None);
    assert_eq!(key, "tdma.cycle_us");
    assert!(text.contains("shorter than its slots together (20 µs)"), "{text}");
    assert_eq!(check(Arbitration::Tdma, Some(tdma(None, &[("a b", 10)])), None).0, "tdma.slots");
    let (key, text) = check(Arbitration::Token, None, Some(token(&["a", "a"], 10, 1)));
    assert_eq!((key, text.as_str()), ("token.order", "port 'a' is on the ring twice"));
    assert_eq!(check(Arbitration::Token, None, Some(token(&[], 10, 1))).0, "token.order");
    assert_eq!(check(Arbitration::Token, None, Some(token(&["a"], 0, 1))).0, "token.hold_us");
    assert_eq!(check(Arbitration::Token, None, Some(token(&["a"], 10, 0))).0, "token.max_frames");
}

fn polling(master: &str, poll: &[&str], response_timeout_us: u64) -> MasterSlaveConfig {
    MasterSlaveConfig { master: master.into(), poll: poll.iter().map(|s| (*s).into()).collect(), response_timeout_us }
}

/// A master-slave channel: port 1 (a) is the master.
fn polled_channel(poll: &[&str], response_timeout_us: u64) -> Channel {
    channel_with(ChannelConfig {
        arbitration: Arbitration::MasterSlave,
        master_slave: Some(polling("a", poll, response_timeout_us)),
        ..ChannelConfig::new("bus", Protocol::Can)
    })
}

#[test]
fn master_slave_polls_each_slave_in_order_and_each_answers_right_after_its_poll() {
    let mut channel = polled_channel(&["b", "c"], 100);
    queue(&mut channel, 1, 4, 0);
    queue(&mut channel, 2, 2, 0);
    queue(&mut channel, 3, 2, 0);
    let d = frame_ns();
    let starts = run(&mut channel, 0, u64::MAX);
    // poll b, b answers, poll c, c answers, and again.
    let expected: Vec<(u32, u64)> =
        [1, 2, 1, 3, 1, 2, 1, 3].iter().enumerate().map(|(k, &n)| (n, k as u64 * d)).collect();
    assert_eq!(starts, expected);
    assert_eq!(starts[4].1 - starts[0].1, 4 * d, "polling cycle: two polls and two answers");
}

#[test]
fn master_slave_unanswered_poll_keeps_the_bus_idle_for_the_response_timeout() {
    let timeout = 100 * US;
    let mut channel = polled_channel(&["b", "c"], 100);
    queue(&mut channel, 1, 3, 0);
    queue(&mut channel, 2, 2, 0);
    let d = frame_ns();
    // c has nothing: after its poll the master waits the timeout; b's
    // second frame waits for b's next poll.
    let starts = run(&mut channel, 0, u64::MAX);
    assert_eq!(starts, [(1, 0), (2, d), (1, 2 * d), (1, 3 * d + timeout), (2, 4 * d + timeout)]);
    assert_eq!(starts[3].1 - starts[0].1, 3 * d + timeout, "polling cycle with c silent");
}

#[test]
fn master_slave_slave_sends_only_when_polled() {
    let mut channel = polled_channel(&["b"], 100);
    queue(&mut channel, 2, 2, 0);
    assert_eq!(run(&mut channel, 0, 1_000_000 * US), [], "no poll, no answer");
    let d = frame_ns();
    let at = 1_000_000 * US;
    queue(&mut channel, 1, 1, at);
    assert_eq!(run(&mut channel, at, u64::MAX), [(1, at), (2, at + d)], "one poll, one answer");
}

#[test]
fn master_slave_answer_arriving_within_the_timeout_goes_at_once_and_a_later_one_waits_for_a_poll() {
    let timeout = 100 * US;
    let mut channel = polled_channel(&["b"], 100);
    let d = frame_ns();
    queue(&mut channel, 1, 1, 0);
    queue(&mut channel, 2, 1, d + timeout / 2);
    assert_eq!(run(&mut channel, 0, u64::MAX), [(1, 0), (2, d + timeout / 2)]);
    // Polled at 10 d; the answer comes just after the timeout: too late.
    queue(&mut channel, 1, 1, 10 * d);
    queue(&mut channel, 2, 1, 11 * d + timeout);
    assert_eq!(run(&mut channel, 10 * d, 20 * d - 1), [(1, 10 * d)]);
    queue(&mut channel, 1, 1, 20 * d);
    assert_eq!(run(&mut channel, 20 * d, u64::MAX), [(1, 20 * d), (2, 21 * d)]);
}

#[test]
fn master_slave_in_ideal_timing_still_waits_out_an_unanswered_poll() {
    let timeout = 100 * US;
    let mut channel = polled_channel(&["c", "b"], 100);
    channel.config.timing = Timing::Ideal;
    queue(&mut channel, 1, 2, 0);
    queue(&mut channel, 2, 1, 0);
    let d = frame_ns();
    let mut sent = Vec::new();
    assert_eq!(channel.service(0, &mut sent), Some(d + timeout), "c, polled, is silent");
    assert_eq!(channel.service(d + timeout, &mut sent), None);
    let order: Vec<(Option<PortId>, u64)> = sent.iter().map(|t| (t.sender, t.timestamp_ns)).collect();
    assert_eq!(order, [(Some(port(1)), 0), (Some(port(1)), d + timeout), (Some(port(2)), d + timeout)]);
}

#[test]
fn master_slave_refuses_ports_neither_master_nor_polled() {
    let channel = polled_channel(&["b", "b"], 100);
    let refused = channel.arbitration_refuses(port(3), &frame()).unwrap();
    assert_eq!(refused, "is neither this channel's master (a) nor a slave it polls (b)");
    assert_eq!(channel.arbitration_refuses(port(1), &frame()), None);
    assert_eq!(channel.arbitration_refuses(port(2), &frame()), None);
}

#[test]
fn master_slave_settings_errors_name_the_key() {
    let check = |arbitration, master_slave: Option<MasterSlaveConfig>| {
        ChannelConfig { arbitration, master_slave, ..ChannelConfig::new("bus", Protocol::Can) }
            .check_arbitration()
            .unwrap_err()
    };
    let (key, text) = check(Arbitration::MasterSlave, None);
    assert_eq!(key, "master_slave");
    assert!(text.contains("needs a [channel.master_slave] table"), "{text}");
    let (key, text) = check(Arbitration::Can, Some(polling("a", &["b"], 1)));
    assert_eq!(
        (key, text.as_str()),
        ("master_slave", "a [channel.master_slave] table needs arbitration = \"master-slave\", not \"can\"")
    );
    assert_eq!(check(Arbitration::MasterSlave, Some(polling("a", &[], 1))).0, "master_slave.poll");
    let (key, text) = check(Arbitration::MasterSlave, Some(polling("a", &["b", "a"], 1)));
    assert_eq!((key, text.as_str()), ("master_slave.poll", "'a' is the master; the master does not poll itself"));
    assert_eq!(check(Arbitration::MasterSlave, Some(polling("a b", &["b"], 1))).0, "master_slave.master");
    assert_eq!(check(Arbitration::MasterSlave, Some(polling("a", &["b"], 0))).0, "master_slave.response_timeout_us");
}

#[test]
fn master_slave_arbitration_is_read_from_toml() {
    let text = "name = \"bus\"\narbitration = \"master-slave\"\n[master_slave]\nmaster = \"plc\"\npoll = [\"io1\", \"io2\"]\nresponse_timeout_us = 200\n";
    let config: ChannelConfig = toml::from_str(text).unwrap();
    assert_eq!(config.arbitration, Arbitration::MasterSlave);
    assert_eq!(
        config.master_slave,
        Some(MasterSlaveConfig {
            master: "plc".into(),
            poll: vec!["io1".into(), "io2".into()],
            response_timeout_us: 200
        })
    );
    config.check_arbitration().unwrap();
}
