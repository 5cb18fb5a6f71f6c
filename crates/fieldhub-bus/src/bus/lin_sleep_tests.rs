//! LIN sleep and wake-up as clients meet them, on the manual clock: a
//! wake-up record returns its transmit credit at once and goes out before
//! the port's queued response, a port opened on a sleeping channel is told
//! it sleeps, as the ports there before were, and a pulse lost to a pulled
//! cable is told to its sender.

use fieldhub_proto::fate::{ChannelCondition, DropReason};
use fieldhub_proto::lin::Checksum;
use fieldhub_proto::wire::PortOptions;
use fieldhub_proto::{Frame, FrameFlags};

use super::harness::{Harness, TestClient, START_NS};
use super::lin_standing_tests::run_until;
use crate::inbox::Inbound;
use crate::outbox::Outbound;
use crate::request::ControlRequest;

const MS: u64 = 1_000_000;

const LIN: &str = r#"
    [[channel]]
    name = "body"
    protocol = "lin"
    bitrate = 19200
    timing = "timed"

    [channel.lin]
    schedule = [{ id = 0x10, delay_ms = 10 }, { id = 0x11, delay_ms = 10 }]
"#;

/// What `client` was sent, in order: frames (identifier, flags, bus time
/// from `origin`) and channel states.
#[derive(Debug, PartialEq, Eq)]
enum Told {
    Frame(u32, FrameFlags, u64),
    State(ChannelCondition),
}

fn told(h: &Harness, client: &TestClient, origin: u64) -> Vec<Told> {
    h.items(client)
        .into_iter()
        .filter_map(|item| match item {
            Outbound::Frame { frame, meta, .. } => {
                Some(Told::Frame(frame.id(), frame.flags(), meta.timestamp_ns - origin))
            }
            Outbound::ChannelState { condition, .. } => Some(Told::State(condition)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_wake_up_returns_its_credit_at_once_and_goes_before_the_ports_queued_response() {
    let mut h = Harness::new(LIN);
    let reader = h.connect("reader");
    h.open(&reader, "body", "reader", PortOptions::empty());
    let slave = h.connect("slave");
    let port = h.open(&slave, "body", "slave", PortOptions::empty());
    // Asked before the schedule's first slot: the command takes that slot.
    h.control(ControlRequest::LinPower { channel: "body".into(), sleep: true }).unwrap();
    // Queued before the bus sleeps: 0x11's slot comes after the wake-up.
    h.send(&slave, port, Frame::lin(0x11, Checksum::Enhanced, &[1, 2]).unwrap());
    run_until(&mut h, START_NS + 500 * MS);
    assert!(h.send_with_credit(&slave, port, Frame::lin_wake_up()), "the pulse found no credit");
    run_until(&mut h, START_NS + 620 * MS);
    let none = FrameFlags::LIN_NO_RESPONSE;
    let woke = 500 * MS + 260_416;
    // Each state comes after the frame that caused it, before the next.
    assert_eq!(
        told(&h, &reader, START_NS),
        [
            Told::Frame(0x3C, FrameFlags::LIN_CLASSIC, 6_458_333),
            Told::State(ChannelCondition::Asleep),
            Told::Frame(0x00, FrameFlags::LIN_WAKE_UP, woke),
            Told::State(ChannelCondition::Awake),
            Told::Frame(0x10, none, woke + 100 * MS + 1_770_833),
            Told::Frame(0x11, FrameFlags::empty(), woke + 110 * MS + 3_333_333),
        ]
    );
}

#[test]
fn a_port_opened_on_a_sleeping_channel_is_told_it_sleeps() {
    let mut h = Harness::new(LIN);
    let reader = h.connect("reader");
    h.open(&reader, "body", "reader", PortOptions::empty());
    h.control(ControlRequest::LinPower { channel: "body".into(), sleep: true }).unwrap();
    run_until(&mut h, START_NS + 100 * MS);
    let late = h.connect("late");
    h.open(&late, "body", "late", PortOptions::empty());
    assert_eq!(told(&h, &late, START_NS), [Told::State(ChannelCondition::Asleep)]);
    let awake = h.connect("awake");
    h.control(ControlRequest::LinPower { channel: "body".into(), sleep: false }).unwrap();
    run_until(&mut h, START_NS + 101 * MS);
    h.open(&awake, "body", "awake", PortOptions::empty());
    let awake_told: Vec<Told> =
        told(&h, &awake, START_NS).into_iter().filter(|t| matches!(t, Told::State(_))).collect();
    assert_eq!(awake_told, [], "a port opened after the wake-up hears no state");
}

#[test]
fn in_virtual_time_a_port_closed_right_after_its_wake_up_lingers_until_its_pulse_is_on_the_bus() {
    let mut h = Harness::in_virtual_time(LIN);
    let ecu = h.connect_synchronized("ecu");
    h.open(&ecu, "body", "ecu", PortOptions::empty());
    h.control(ControlRequest::LinPower { channel: "body".into(), sleep: true }).unwrap();
    h.announce(&ecu, 500 * MS);
    assert!(h.advance_virtual_time());
    // An observer (`fieldhub send`) wakes the bus at 500 ms and closes its
    // port before bus time moves on.
    let door = h.connect("door");
    let port = h.open(&door, "body", "door", PortOptions::empty());
    h.send(&door, port, Frame::lin_wake_up());
    h.bus.handle(Inbound::ClosePort { client: door.id, port });
    h.announce(&ecu, 620 * MS);
    assert!(h.advance_virtual_time());
    let woke = 500 * MS + 260_416;
    let frames: Vec<Told> = told(&h, &ecu, 0).into_iter().filter(|t| matches!(t, Told::Frame(..))).collect();
    assert_eq!(
        frames,
        [
            Told::Frame(0x3C, FrameFlags::LIN_CLASSIC, 6_458_333),
            Told::Frame(0x00, FrameFlags::LIN_WAKE_UP, woke),
            Told::Frame(0x10, FrameFlags::LIN_NO_RESPONSE, woke + 100 * MS + 1_770_833),
            Told::Frame(0x11, FrameFlags::LIN_NO_RESPONSE, woke + 110 * MS + 1_770_833),
        ]
    );
}

#[test]
fn in_virtual_time_an_observers_pulse_served_while_its_port_lingers_goes_once_the_port_is_back() {
    use crate::request::TimeCommand;
    let mut h = Harness::in_virtual_time(LIN);
    let reader = h.connect("reader");
    h.open(&reader, "body", "reader", PortOptions::empty());
    h.control(ControlRequest::LinPower { channel: "body".into(), sleep: true }).unwrap();
    h.control(ControlRequest::SetTime(TimeCommand::RunUntil { until_ns: 1_000 * MS })).unwrap();
    while h.advance_virtual_time() {}
    // `fieldhub send LW#-` at 1 s: the client leaves at once, and the bus
    // serves the channel before bus time moves (its port lingers then).
    let door = h.connect("door");
    let port = h.open(&door, "body", "door", PortOptions::empty());
    h.send(&door, port, Frame::lin_wake_up());
    h.bus.handle(Inbound::Detach { client: door.id, reason: "said goodbye".into() });
    h.step();
    h.control(ControlRequest::SetTime(TimeCommand::RunUntil { until_ns: 1_105 * MS })).unwrap();
    while h.advance_virtual_time() {}
    let woke = 1_000 * MS + 260_416;
    assert_eq!(
        told(&h, &reader, 0),
        [
            Told::Frame(0x3C, FrameFlags::LIN_CLASSIC, 6_458_333),
            Told::State(ChannelCondition::Asleep),
            Told::Frame(0x00, FrameFlags::LIN_WAKE_UP, woke),
            Told::State(ChannelCondition::Awake),
            Told::Frame(0x10, FrameFlags::LIN_NO_RESPONSE, woke + 100 * MS + 1_770_833),
        ]
    );
}

#[test]
fn a_wake_up_pulse_that_waits_when_its_ports_cable_is_pulled_is_told_dropped_as_unplugged() {
    let mut h = Harness::new(LIN);
    let reader = h.connect("reader");
    h.open(&reader, "body", "reader", PortOptions::empty());
    let (first, second) = (h.connect("first"), h.connect("second"));
    let first_port = h.open(&first, "body", "first", PortOptions::empty());
    let second_port = h.open(&second, "body", "second", PortOptions::empty());
    h.control(ControlRequest::LinPower { channel: "body".into(), sleep: true }).unwrap();
    run_until(&mut h, START_NS + 500 * MS);
    // Two pulses at once: the second waits while the first is on the wire
    // (5 bit times, 260 µs at 19,200 bit/s).
    assert!(h.send_with_credit(&first, first_port, Frame::lin_wake_up()));
    assert!(h.send_with_credit(&second, second_port, Frame::lin_wake_up()));
    run_until(&mut h, START_NS + 500 * MS + 100_000);
    h.control(ControlRequest::Unplug { port: "second".into() }).unwrap();
    run_until(&mut h, START_NS + 520 * MS);
    let pulses = told(&h, &reader, START_NS).into_iter().filter(|t| matches!(t, Told::Frame(0, _, _))).count();
    assert_eq!(pulses, 1, "only the first port's pulse went on the bus");
    let drops: Vec<(DropReason, u32)> = h
        .items(&second)
        .into_iter()
        .filter_map(|item| match item {
            Outbound::TxDropped { reason, dropped, .. } => Some((reason, dropped)),
            _ => None,
        })
        .collect();
    assert_eq!(drops, [(DropReason::Unplugged, 1)], "the second port's sender hears its pulse was lost");
}
