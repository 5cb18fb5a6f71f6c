//! The LIN master's schedule on a manually driven clock: every frame's
//! timestamp (its end of frame) against times computed by hand from the
//! LIN 2.x frame format at 19.2 kbit/s.

use std::sync::Arc;

use fieldhub_proto::lin::Checksum;
use fieldhub_proto::wire::PortOptions;
use fieldhub_proto::{Frame, FrameFlags};

use crate::channel::{Channel, Transmitted};
use crate::config::{
    Arbitration, ChannelConfig, LinChecksum, LinConfig, LinFrameConfig, LinSlotConfig, Protocol, Timing,
};
use crate::credit::TxCredit;
use crate::member::Member;
use crate::outbox::test_outbox;
use crate::port_id::PortId;
use crate::tx_queue::{Pending, TxQueue};

pub(super) const MS: u64 = 1_000_000;

/// Nominal frames at 19,200 bit/s (34 header bits, 10 per byte and the
/// checksum), rounded down to the nanosecond.
pub(super) const TWO_BYTES_NS: u64 = 3_333_333; // 64 bits
pub(super) const FOUR_BYTES_NS: u64 = 4_375_000; // 84 bits
pub(super) const EIGHT_BYTES_NS: u64 = 6_458_333; // 124 bits
pub(super) const HEADER_NS: u64 = 1_770_833; // 34 bits

pub(super) fn port(n: u32) -> PortId {
    PortId::client(n).unwrap()
}

pub(super) fn schedule(slots: &[(u8, u64)]) -> LinConfig {
    LinConfig {
        ldf: None,
        schedule_table: None,
        schedule: slots
            .iter()
            .map(|&(id, delay_ms)| LinSlotConfig { id: Some(id), sporadic: None, delay_ms })
            .collect(),
        frames: Vec::new(),
        event_triggered: Vec::new(),
        sporadic: Vec::new(),
        idle_timeout_ms: 4_000,
        wake_delay_ms: 100,
        wake_retry_ms: 150,
    }
}

pub(super) fn config(slots: &[(u8, u64)]) -> ChannelConfig {
    ChannelConfig {
        bitrate: 19_200,
        timing: Timing::Timed,
        lin: Some(schedule(slots)),
        ..ChannelConfig::new("body", Protocol::Lin)
    }
}

/// A LIN channel with ports 1 and 2 (slaves) and 3 (a listener).
pub(super) fn lin_channel(slots: &[(u8, u64)]) -> Channel {
    channel_of(config(slots))
}

/// A channel of `config` with ports 1, 2 and 3.
pub(super) fn channel_of(config: ChannelConfig) -> Channel {
    config.check_rates().unwrap();
    config.check_arbitration().unwrap();
    let mut channel = Channel::new(0, config);
    for n in 1..=3 {
        let (outbox, _) = test_outbox();
        let credit = Arc::new(TxCredit::for_current_thread());
        channel.members.push(Member::client(n, 0, port(n), PortOptions::empty(), outbox, credit, TxQueue::new(None)));
    }
    channel
}

pub(super) fn response(id: u8, len: usize) -> Frame {
    Frame::lin(id, Checksum::Enhanced, &[id; 8][..len]).unwrap()
}

/// Publish `frames` from port `n`, in order.
pub(super) fn publish(channel: &mut Channel, n: u32, frames: impl IntoIterator<Item = Frame>) {
    for (i, frame) in frames.into_iter().enumerate() {
        let arrival = u64::from(n) * 1_000_000 + i as u64;
        channel.member_mut(port(n)).unwrap().tx.push(Pending { frame, arrival, hops: 0, arrived_ns: 0 });
    }
}

/// Serve `channel` from bus time 0 at every time it asks for, up to `until`.
pub(super) fn run(channel: &mut Channel, until: u64) -> Vec<Transmitted> {
    let mut sent = Vec::new();
    let mut now = 0;
    while let Some(wake) = channel.service(now, &mut sent) {
        assert!(wake > now, "the channel asked to be served at {wake}, not after {now}");
        if wake > until {
            break;
        }
        now = wake;
    }
    sent
}

#[test]
fn three_slot_schedule_with_two_slaves_runs_1000_cycles_with_exact_frame_times() {
    // 0x10 (a, 2 bytes) 10 ms, 0x11 (b, 4 bytes) 10 ms, 0x20 (b, 8 bytes)
    // 15 ms: a 35 ms cycle. Each frame ends its slot's start plus its time.
    let mut channel = lin_channel(&[(0x10, 10), (0x11, 10), (0x20, 15)]);
    const CYCLES: u64 = 1_000;
    publish(&mut channel, 1, (0..CYCLES).map(|_| response(0x10, 2)));
    publish(&mut channel, 2, (0..CYCLES).flat_map(|_| [response(0x11, 4), response(0x20, 8)]));
    let sent = run(&mut channel, CYCLES * 35 * MS - 1);
    assert_eq!(sent.len(), 3 * CYCLES as usize);
    for (k, cycle) in sent.chunks(3).enumerate() {
        let start = k as u64 * 35 * MS;
        let got: Vec<(Option<PortId>, u32, u64)> =
            cycle.iter().map(|t| (t.sender, t.frame.id(), t.timestamp_ns)).collect();
        let expected = [
            (Some(port(1)), 0x10, start + TWO_BYTES_NS),
            (Some(port(2)), 0x11, start + 10 * MS + FOUR_BYTES_NS),
            (Some(port(2)), 0x20, start + 20 * MS + EIGHT_BYTES_NS),
        ];
        assert_eq!(got, expected, "cycle {k}");
    }
    assert_eq!(channel.frames, 3 * CYCLES);
    assert_eq!(channel.lin_no_responses(), Some(0));
    // Every response was confirmed sent; nothing waits.
    for n in [1, 2] {
        let member = channel.member_mut(port(n)).unwrap();
        assert_eq!(member.tx.len(), 0);
        assert_eq!(member.counters.tx_frames, if n == 1 { CYCLES } else { 2 * CYCLES });
    }
}

#[test]
fn a_slot_nobody_answers_puts_a_no_response_header_on_the_bus_and_counts_it() {
    let mut channel = lin_channel(&[(0x10, 10), (0x30, 5)]);
    publish(&mut channel, 1, [response(0x10, 2), response(0x10, 2)]);
    let sent = run(&mut channel, 30 * MS - 1);
    let got: Vec<(Option<PortId>, u32, FrameFlags, u64)> =
        sent.iter().map(|t| (t.sender, t.frame.id(), t.frame.flags(), t.timestamp_ns)).collect();
    let none = FrameFlags::LIN_NO_RESPONSE;
    assert_eq!(
        got,
        [
            (Some(port(1)), 0x10, FrameFlags::empty(), TWO_BYTES_NS),
            (None, 0x30, none, 10 * MS + HEADER_NS),
            (Some(port(1)), 0x10, FrameFlags::empty(), 15 * MS + TWO_BYTES_NS),
            (None, 0x30, none, 25 * MS + HEADER_NS),
        ]
    );
    assert_eq!(channel.lin_no_responses(), Some(2));
    // Nothing left to publish: 0x10 goes unanswered from 30 ms on.
    let mut more = Vec::new();
    channel.service(30 * MS + HEADER_NS, &mut more);
    assert_eq!(more.len(), 1);
    assert!(more[0].frame.flags().contains(none) && more[0].frame.id() == 0x10);
}

#[test]
fn of_two_responses_for_one_identifier_the_first_published_answers_and_the_other_the_next_slot() {
    let mut channel = lin_channel(&[(0x10, 10)]);
    publish(&mut channel, 2, [response(0x10, 2)]);
    // Port 1's arrival numbers are lower: published first.
    publish(&mut channel, 1, [response(0x10, 2)]);
    let sent = run(&mut channel, 15 * MS);
    let got: Vec<(Option<PortId>, u64)> = sent.iter().map(|t| (t.sender, t.timestamp_ns)).collect();
    assert_eq!(got, [(Some(port(1)), TWO_BYTES_NS), (Some(port(2)), 10 * MS + TWO_BYTES_NS)]);
}

#[test]
fn the_schedule_starts_when_the_channel_is_first_served_and_stops_without_ports() {
    let mut channel = lin_channel(&[(0x10, 10)]);
    let mut sent = Vec::new();
    // First served at 7 ms: the first slot starts then.
    assert_eq!(channel.service(7 * MS, &mut sent), Some(7 * MS + HEADER_NS));
    for n in 1..=3 {
        channel.detach(port(n));
    }
    assert_eq!(channel.service(7 * MS + HEADER_NS, &mut sent), None, "no port, no master");
    assert!(sent.is_empty());
}

#[test]
fn responses_the_schedule_cannot_carry_are_refused_as_they_come() {
    let channel = lin_channel(&[(0x10, 10), (0x11, 5)]);
    let refused = |frame: &Frame| channel.arbitration_refuses(port(1), frame);
    assert_eq!(refused(&response(0x10, 8)), None);
    let text = refused(&response(0x12, 1)).unwrap();
    assert!(text.contains("identifier 0x12, which this channel's schedule table never sends (0x10, 0x11)"), "{text}");
    let text = refused(&response(0x11, 8)).unwrap();
    assert!(text.contains("takes 6458333 ns on the wire, longer than the shortest slot of identifier 0x11"), "{text}");
    let text = refused(&Frame::can(0x10, false, &[1]).unwrap()).unwrap();
    assert!(text.contains("not a LIN frame"), "{text}");
    let text = refused(&Frame::lin_no_response(0x10).unwrap()).unwrap();
    assert!(text.contains("only the master (the hub) sends"), "{text}");
}

#[test]
fn lin_settings_errors_name_the_key() {
    let check = |config: ChannelConfig| config.check_arbitration().unwrap_err().0;
    let without_table = ChannelConfig { lin: None, ..config(&[(0x10, 10)]) };
    assert_eq!(check(without_table), "lin");
    let on_can = ChannelConfig { protocol: Protocol::Can, ..config(&[(0x10, 10)]) };
    assert_eq!(check(on_can), "lin");
    assert_eq!(check(config(&[])), "lin.schedule");
    let (key, text) = config(&[(0x40, 10)]).check_arbitration().unwrap_err();
    assert_eq!((key, text.as_str()), ("lin.schedule", "slot 1: id 0x40 is over 0x3F (6 bits)"));
    assert_eq!(check(config(&[(0x10, 10), (0x11, 0)])), "lin.schedule");
    let ruled = ChannelConfig { arbitration: Arbitration::Token, ..config(&[(0x10, 10)]) };
    assert_eq!(check(ruled), "arbitration");
    let fast = ChannelConfig { bitrate: 500_000, ..config(&[(0x10, 10)]) };
    let (key, text) = fast.check_rates().unwrap_err();
    assert_eq!(key, "bitrate");
    assert!(text.contains("500000 bit/s is not a LIN bitrate"), "{text}");
}

#[test]
fn lin_channel_is_read_from_toml() {
    let text = "name = \"body\"\nprotocol = \"lin\"\nbitrate = 19200\ntiming = \"timed\"\n\n[lin]\nschedule = [{ id = 0x10, delay_ms = 10 }, { id = 0x3C, delay_ms = 20 }]\n";
    let config: ChannelConfig = toml::from_str(text).unwrap();
    assert_eq!(config.protocol, Protocol::Lin);
    assert_eq!(config.lin, Some(schedule(&[(0x10, 10), (0x3C, 20)])));
    config.check_rates().unwrap();
    config.check_arbitration().unwrap();
}

/// The channel of `lin_channel` with an LDF's frames: 0x10 (2 bytes) from
/// `door`, 0x3C (8 bytes, classic) from `BCM`; port 1 is `door`, 2 `seat`.
pub(super) fn lin_channel_with_frames() -> Channel {
    let mut channel = lin_channel(&[(0x10, 10), (0x3C, 20)]);
    let frame = |name: &str, id, length, checksum, publisher: &str| LinFrameConfig {
        name: name.into(),
        id,
        length,
        checksum,
        publishers: vec![publisher.into()],
    };
    let mut config = channel.config.clone();
    config.lin.as_mut().unwrap().frames = vec![
        frame("DoorStatus", 0x10, 2, LinChecksum::Enhanced, "door"),
        frame("MasterReq", 0x3C, 8, LinChecksum::Classic, "BCM"),
    ];
    config.check_arbitration().unwrap();
    let members = std::mem::take(&mut channel.members);
    channel = Channel::new(0, config);
    channel.members = members;
    channel.name_port(port(1), "door");
    channel.name_port(port(2), "seat");
    channel
}

#[test]
fn with_frames_only_their_publisher_may_answer_with_their_length_and_checksum() {
    let channel = lin_channel_with_frames();
    let refused = |n: u32, frame: &Frame| channel.arbitration_refuses(port(n), frame);
    assert_eq!(refused(1, &response(0x10, 2)), None);
    let text = refused(2, &response(0x10, 2)).unwrap();
    assert!(
        text.contains(
            "frame DoorStatus (0x10), which node door publishes; open the port under that name (--port door)"
        ),
        "{text}"
    );
    let text = refused(3, &response(0x10, 2)).unwrap();
    assert!(text.contains("which node door publishes"), "{text}");
    let text = refused(1, &response(0x10, 1)).unwrap();
    assert!(
        text.contains("publishes a 1-byte response for frame DoorStatus (0x10), whose length is 2 bytes"),
        "{text}"
    );
    let classic = Frame::lin(0x10, Checksum::Classic, &[1, 2]).unwrap();
    let text = refused(1, &classic).unwrap();
    assert!(text.contains("with the classic checksum; its checksum is enhanced"), "{text}");
    let text = refused(1, &response(0x3C, 8)).unwrap();
    assert!(text.contains("with the enhanced checksum; its checksum is classic"), "{text}");
    let request = Frame::lin(0x3C, Checksum::Classic, &[0; 8]).unwrap();
    assert!(refused(1, &request).unwrap().contains("which node BCM publishes"));
}

#[test]
fn frames_settings_errors_name_the_key() {
    let mut config = config(&[(0x10, 10), (0x11, 10)]);
    let lin = config.lin.as_mut().unwrap();
    lin.frames = vec![LinFrameConfig {
        name: "DoorStatus".into(),
        id: 0x10,
        length: 2,
        checksum: LinChecksum::Enhanced,
        publishers: vec!["door".into()],
    }];
    let (key, text) = config.check_arbitration().unwrap_err();
    assert_eq!((key, text.as_str()), ("lin.frames", "the schedule sends 0x11, which no frame defines"));
    let lin = config.lin.as_mut().unwrap();
    lin.frames[0].length = 9;
    assert!(config.check_arbitration().unwrap_err().1.contains("length 9 is not 1..=8"));
    let unread =
        ChannelConfig { lin: Some(LinConfig { ldf: Some("body.ldf".into()), ..schedule(&[(0x10, 10)]) }), ..config };
    let (key, text) = unread.check_arbitration().unwrap_err();
    assert_eq!(key, "lin.ldf");
    assert!(text.contains("read only from the hub's configuration file"), "{text}");
}
