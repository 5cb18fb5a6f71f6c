//! LIN sleep and wake-up on a manually driven clock, at 19.2 kbit/s: the
//! go-to-sleep command at its slot boundary, the schedule stopped, the
//! bus-idle timeout, a wake-up pulse, the schedule resuming at its first slot
//! after the wake-up delay, a waker's repeated pulses, and what a sleeping
//! bus does with a frame sent to it — every time computed by hand.

use std::sync::Arc;

use fieldhub_proto::fate::ChannelCondition;
use fieldhub_proto::lin::{Checksum, GO_TO_SLEEP};
use fieldhub_proto::{Frame, FrameFlags};

use super::lin_tests::{
    channel_of, config, lin_channel_with_frames, port, publish, response, HEADER_NS, MS, TWO_BYTES_NS,
};
use crate::channel::{Channel, Transmitted};
use crate::config::{LinSlotConfig, LinSporadicConfig};
use crate::outbox::{Outbound, QueueOutbox};
use crate::port_id::PortId;
use crate::tx_queue::Pending;

/// The go-to-sleep command: 8 bytes, 124 bits = 6.458333 ms.
const SLEEP_NS: u64 = 6_458_333;
/// A wake-up pulse: 5 bit times = 260.416 µs.
const PULSE_NS: u64 = 260_416;

/// Send `frame` from port `n`, arriving at bus time `at`.
fn send_at(channel: &mut Channel, n: u32, frame: Frame, at: u64) {
    let arrival = 10_000_000 + at;
    channel.member_mut(port(n)).unwrap().tx.push(Pending { frame, arrival, hops: 0, arrived_ns: at });
}

/// Serve `channel` at every time it asks for from `from` on, up to `until`,
/// appending what it sent to `sent`; the times it asked for.
fn serve(channel: &mut Channel, from: u64, until: u64, sent: &mut Vec<Transmitted>) -> Vec<u64> {
    let mut asked = Vec::new();
    let mut now = from;
    while let Some(wake) = channel.service(now, sent) {
        assert!(wake > now, "the channel asked to be served at {wake}, not after {now}");
        if wake > until {
            break;
        }
        asked.push(wake);
        now = wake;
    }
    asked
}

/// A frame on the bus: sender, identifier, flags, timestamp.
type Seen = (Option<PortId>, u32, FrameFlags, u64);

fn seen(sent: &[Transmitted]) -> Vec<Seen> {
    sent.iter().map(|t| (t.sender, t.frame.id(), t.frame.flags(), t.timestamp_ns)).collect()
}

/// What a port's client was sent: frames as `F <id> <timestamp>`, channel
/// states as their name.
fn told(outbox: &QueueOutbox) -> Vec<String> {
    outbox
        .drain()
        .into_iter()
        .filter_map(|item| match item {
            Outbound::Frame { frame, meta, .. } => Some(format!("F {:02X} {}", frame.id(), meta.timestamp_ns)),
            Outbound::ChannelState { condition, .. } => Some(condition.name().to_owned()),
            _ => None,
        })
        .collect()
}

/// Ports 1 and 2 (slaves) and 3, a listener whose client's outbox the test
/// reads: a channel of `slots`.
fn channel_with_listener(slots: &[(u8, u64)]) -> (Channel, Arc<QueueOutbox>) {
    let mut channel = channel_of(config(slots));
    channel.detach(port(3));
    let (outbox, queue) = crate::outbox::test_outbox();
    let credit = Arc::new(crate::credit::TxCredit::for_current_thread());
    let options = fieldhub_proto::wire::PortOptions::empty();
    let queue_tx = crate::tx_queue::TxQueue::new(None);
    channel.members.push(crate::member::Member::client(3, 0, port(3), options, outbox, credit, queue_tx));
    (channel, queue)
}

fn standing(id: u8, data: &[u8]) -> Frame {
    Frame::lin_standing(id, Checksum::Enhanced, data).unwrap()
}

#[test]
fn a_ports_go_to_sleep_command_goes_out_at_the_next_slot_boundary_and_stops_the_schedule() {
    // 0x10 (port 1 stands) 10 ms, 0x11 (nobody) 10 ms.
    let (mut channel, listener) = channel_with_listener(&[(0x10, 10), (0x11, 10)]);
    channel.stand(port(1), &standing(0x10, &[1, 2])).unwrap();
    // Port 2, the master's, sends the command at 12 ms, within slot 0x11:
    // it goes at the next boundary, 20 ms, instead of that slot's 0x10.
    send_at(&mut channel, 2, Frame::lin_go_to_sleep(), 12 * MS);
    let mut sent = Vec::new();
    let asked = serve(&mut channel, 0, 10_000 * MS, &mut sent);
    let none = FrameFlags::LIN_NO_RESPONSE;
    assert_eq!(
        seen(&sent),
        [
            (Some(port(1)), 0x10, FrameFlags::empty(), TWO_BYTES_NS),
            (None, 0x11, none, 10 * MS + HEADER_NS),
            (Some(port(2)), 0x3C, FrameFlags::LIN_CLASSIC, 20 * MS + SLEEP_NS),
        ]
    );
    assert_eq!(sent[2].frame.data(), GO_TO_SLEEP);
    // Asleep: no header, no idle timer, nothing more to serve.
    assert_eq!(asked.last(), Some(&(20 * MS + SLEEP_NS)));
    let power = channel.lin_power().unwrap();
    assert_eq!((power.state, power.sleeps, power.wake_ups), ("asleep", 1, 0));
    let expected = ["F 10 3333333", "F 11 11770833", "F 3C 26458333", "asleep"];
    assert_eq!(told(&listener), expected, "the listener hears the state after the command");
    assert_eq!(channel.member_mut(port(2)).unwrap().counters.tx_frames, 1, "the command was confirmed sent");
}

#[test]
fn the_control_apis_go_to_sleep_is_the_hubs_frame_at_the_next_slot_boundary() {
    let (mut channel, _listener) = channel_with_listener(&[(0x10, 10)]);
    let mut sent = Vec::new();
    serve(&mut channel, 0, 5 * MS, &mut sent);
    channel.lin_ask(true, 5 * MS).unwrap();
    let again = channel.lin_ask(true, 5 * MS).unwrap_err();
    assert!(again.contains("waiting for the next slot boundary"), "{again}");
    serve(&mut channel, 5 * MS, 1_000 * MS, &mut sent);
    let none = FrameFlags::LIN_NO_RESPONSE;
    assert_eq!(seen(&sent), [(None, 0x10, none, HEADER_NS), (None, 0x3C, FrameFlags::LIN_CLASSIC, 10 * MS + SLEEP_NS)]);
    let asleep = channel.lin_ask(true, 20 * MS).unwrap_err();
    assert!(asleep.contains("asleep already"), "{asleep}");
}

#[test]
fn a_wake_up_pulse_wakes_the_bus_and_the_schedule_resumes_at_its_first_slot_after_the_wake_up_delay() {
    let (mut channel, listener) = channel_with_listener(&[(0x10, 10), (0x11, 10)]);
    channel.stand(port(1), &standing(0x10, &[1, 2])).unwrap();
    // A response queued before the sleep answers its slot after the wake-up.
    publish(&mut channel, 2, [response(0x11, 2)]);
    // Asleep from the first slot boundary, bus time 0.
    channel.lin_ask(true, 0).unwrap();
    let mut sent = Vec::new();
    serve(&mut channel, 0, 999 * MS, &mut sent);
    assert_eq!(told(&listener), ["F 3C 6458333", "asleep"]);
    // Port 2 wakes the bus at 1 s — its pulse does not wait behind its
    // queued response —: the pulse ends 260.416 µs later, the master's
    // first header is 100 ms after that.
    channel.lin_pulse(port(2), 1_000 * MS);
    let woke = 1_000 * MS + PULSE_NS;
    let resume = woke + 100 * MS;
    let asked = serve(&mut channel, 999 * MS, resume + 15 * MS, &mut sent);
    assert!(asked.contains(&resume), "the channel asks for the first header's instant: {asked:?}");
    assert_eq!(
        seen(&sent[1..]),
        [
            (Some(port(2)), 0, FrameFlags::LIN_WAKE_UP, woke),
            (Some(port(1)), 0x10, FrameFlags::empty(), resume + TWO_BYTES_NS),
            (Some(port(2)), 0x11, FrameFlags::empty(), resume + 10 * MS + TWO_BYTES_NS),
        ]
    );
    let expected = [
        format!("F 00 {woke}"),
        "awake".to_owned(),
        format!("F 10 {}", resume + TWO_BYTES_NS),
        format!("F 11 {}", resume + 10 * MS + TWO_BYTES_NS),
    ];
    assert_eq!(told(&listener), expected);
    let power = channel.lin_power().unwrap();
    assert_eq!((power.state, power.sleeps, power.wake_ups), ("awake", 1, 1));
}

#[test]
fn a_waker_repeats_its_pulse_after_150_ms_three_times_then_pauses_1_5_s_until_a_header_comes() {
    // A master that takes 2 s to send its first header after a wake-up.
    let mut config = config(&[(0x10, 10)]);
    config.lin.as_mut().unwrap().wake_delay_ms = 2_000;
    let mut channel = channel_of(config);
    channel.lin_ask(true, 0).unwrap();
    let mut sent = Vec::new();
    serve(&mut channel, 0, 999 * MS, &mut sent);
    channel.lin_pulse(port(1), 1_000 * MS);
    serve(&mut channel, 999 * MS, 3_100 * MS, &mut sent);
    // Pulse ends: 1000.260416 ms; +150 ms +0.260416; +150 ms +0.260416; then
    // 1.5 s after the third's end; the fifth 150 ms after the fourth; the
    // master's header 2 s after the first pulse's end, before a sixth.
    let first = 1_000 * MS + PULSE_NS;
    let second = first + 150 * MS + PULSE_NS;
    let third = second + 150 * MS + PULSE_NS;
    let fourth = third + 1_500 * MS + PULSE_NS;
    let fifth = fourth + 150 * MS + PULSE_NS;
    assert_eq!(
        [first, second, third, fourth, fifth],
        [1_000_260_416, 1_150_520_832, 1_300_781_248, 2_801_041_664, 2_951_302_080]
    );
    let pulse = |end| (Some(port(1)), 0, FrameFlags::LIN_WAKE_UP, end);
    let header = (None, 0x10, FrameFlags::LIN_NO_RESPONSE, first + 2_000 * MS + HEADER_NS);
    assert_eq!(seen(&sent[1..7]), [pulse(first), pulse(second), pulse(third), pulse(fourth), pulse(fifth), header]);
    // Every pulse is the port's frame, none took a transmit credit.
    let member = channel.member_mut(port(1)).unwrap();
    assert_eq!((member.counters.tx_frames, member.tx.len()), (5, 0));
    assert_eq!(channel.lin_power().unwrap().wake_ups, 5);
}

#[test]
fn the_bus_falls_asleep_after_its_idle_timeout_when_every_slot_stays_silent() {
    // One sporadic slot: silent unless 0x21 is pending.
    let mut config = config(&[]);
    let lin = config.lin.as_mut().unwrap();
    lin.schedule.push(LinSlotConfig { id: None, sporadic: Some("Seat".into()), delay_ms: 10 });
    lin.sporadic = vec![LinSporadicConfig { name: "Seat".into(), frames: vec![0x21] }];
    let mut channel = channel_of(config);
    publish(&mut channel, 1, [response(0x21, 1)]);
    let mut sent = Vec::new();
    let asked = serve(&mut channel, 0, 20_000 * MS, &mut sent);
    // 0x21 (1 byte, 54 bits = 2.8125 ms) at 0; then silence: asleep 4 s
    // after its end, and nothing after.
    assert_eq!(seen(&sent), [(Some(port(1)), 0x21, FrameFlags::empty(), 2_812_500)]);
    let idle = 2_812_500 + 4_000 * MS;
    assert_eq!(asked.last(), Some(&idle), "the last instant served is the idle timeout");
    assert_eq!(channel.lin_power().unwrap().state, "asleep");
    // Its sporadic slots stay silent while asleep; a response is refused.
    let why = channel.arbitration_refuses(port(1), &response(0x21, 1)).unwrap();
    assert!(why.contains("asleep") && why.contains("LW#-"), "{why}");
}

#[test]
fn a_sleeping_bus_refuses_one_shot_responses_with_the_reason_and_keeps_standing_ones() {
    let (mut channel, _listener) = channel_with_listener(&[(0x10, 10)]);
    let awake = channel.arbitration_refuses(port(1), &Frame::lin_wake_up()).unwrap();
    assert!(awake.contains("while the channel is awake"), "{awake}");
    let not_the_command = Frame::lin(0x3C, Checksum::Classic, &[0, 1, 2, 3, 4, 5, 6, 7]).unwrap();
    let why = channel.arbitration_refuses(port(2), &not_the_command).unwrap();
    assert!(why.contains("00 FF FF FF FF FF FF FF"), "{why}");
    channel.lin_ask(true, 0).unwrap();
    serve(&mut channel, 0, 100 * MS, &mut Vec::new());
    let why = channel.arbitration_refuses(port(1), &response(0x10, 2)).unwrap();
    assert!(why.contains("while the channel is asleep"), "{why}");
    assert_eq!(channel.arbitration_refuses(port(1), &standing(0x10, &[1, 2])), None);
    assert_eq!(channel.arbitration_refuses(port(1), &Frame::lin_wake_up()), None);
    let again = channel.arbitration_refuses(port(2), &Frame::lin_go_to_sleep()).unwrap();
    assert!(again.contains("asleep already"), "{again}");
}

#[test]
fn the_masters_wake_up_is_the_hubs_pulse_and_the_master_does_not_repeat_it() {
    let (mut channel, listener) = channel_with_listener(&[(0x10, 10)]);
    let awake = channel.lin_ask(false, 0).unwrap_err();
    assert!(awake.contains("is awake"), "{awake}");
    channel.lin_ask(true, 0).unwrap();
    let mut sent = Vec::new();
    serve(&mut channel, 0, 499 * MS, &mut sent);
    channel.lin_ask(false, 500 * MS).unwrap();
    serve(&mut channel, 500 * MS, 605 * MS, &mut sent);
    let woke = 500 * MS + PULSE_NS;
    assert_eq!(
        seen(&sent[1..]),
        [
            (None, 0, FrameFlags::LIN_WAKE_UP, woke),
            (None, 0x10, FrameFlags::LIN_NO_RESPONSE, woke + 100 * MS + HEADER_NS)
        ]
    );
    let states: Vec<String> = told(&listener).into_iter().filter(|t| !t.starts_with('F')).collect();
    assert_eq!(states, [ChannelCondition::Asleep.name(), ChannelCondition::Awake.name()]);
}

#[test]
fn sleep_timings_outside_lin_2_1s_ranges_are_refused_naming_the_key() {
    let cases = [
        ("idle_timeout_ms", 3_999, "4 to 10 s"),
        ("idle_timeout_ms", 10_001, "4 to 10 s"),
        ("wake_retry_ms", 149, "150 to 250 ms"),
        ("wake_retry_ms", 251, "150 to 250 ms"),
    ];
    for (key, value, range) in cases {
        let mut config = config(&[(0x10, 10)]);
        let lin = config.lin.as_mut().unwrap();
        match key {
            "idle_timeout_ms" => lin.idle_timeout_ms = value,
            _ => lin.wake_retry_ms = value,
        }
        let (at, why) = config.check_arbitration().unwrap_err();
        assert_eq!(at, format!("lin.{key}"));
        assert!(why.contains(range), "{why}");
    }
}

#[test]
fn with_an_ldfs_frames_only_the_master_nodes_port_sends_the_go_to_sleep_command() {
    // MasterReq (0x3C) is published by node BCM; port 1 is named door.
    let mut channel = lin_channel_with_frames();
    let why = channel.arbitration_refuses(port(1), &Frame::lin_go_to_sleep()).unwrap();
    assert!(why.contains("which node BCM publishes"), "{why}");
    channel.name_port(port(3), "BCM");
    assert_eq!(channel.arbitration_refuses(port(3), &Frame::lin_go_to_sleep()), None);
}
