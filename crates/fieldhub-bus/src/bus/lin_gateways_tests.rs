//! CAN↔LIN gateways on the manual clock: a CAN frame's response goes out at
//! its LIN identifier's next slot, a LIN response's CAN frame arbitrates
//! from the response's end, to the nanosecond; frames that cannot cross are
//! counted by reason and never reach the other bus. Gateways added and
//! removed through the control API carry from when they are added to when
//! they go, with the configuration's checks.

use fieldhub_proto::bits::FrameBits;
use fieldhub_proto::lin::Checksum;
use fieldhub_proto::wire::PortOptions;
use fieldhub_proto::{Frame, FrameFlags, FrameMeta};

use super::harness::{Harness, START_NS};
use crate::clock::Clock;
use crate::config::MAX_ROUTES;
use crate::lin_gateway::GatewayConfig;
use crate::port_id::PortId;
use crate::request::{ControlError, ControlRequest};

const MS: u64 = 1_000_000;

/// CAN `body` at 500 kbit/s; LIN `doors` at 19.2 kbit/s with 0x10 (the
/// door's state) and 0x20 (the BCM's lamp command, 2 bytes, classic) in
/// 10 ms slots; 0x120 on CAN becomes 0x20's response, 0x10 on LIN becomes
/// 0x310 on CAN.
const MIXED: &str = r#"
    [[channel]]
    name = "body"
    timing = "timed"
    bitrate = 500000

    [[channel]]
    name = "doors"
    protocol = "lin"
    bitrate = 19200
    timing = "timed"

    [channel.lin]
    schedule = [{ id = 0x10, delay_ms = 10 }, { id = 0x20, delay_ms = 10 }]
    frames = [{ name = "Lamp", id = 0x20, length = 2, checksum = "classic", publishers = ["BCM"] }]

    [[gateway]]
    from = "body"
    to = "doors"
    can_id = 0x120
    lin_id = 0x20
    node = "BCM"

    [[gateway]]
    from = "doors"
    to = "body"
    lin_id = 0x10
    can_id = 0x310
"#;

fn can(id: u32, data: &[u8]) -> Frame {
    Frame::can(id, false, data).unwrap()
}

fn can_ns(frame: &Frame) -> u64 {
    FrameBits::of(frame).duration_ns(500_000, 500_000)
}

/// Serve every deadline up to bus time `until`, then `until` itself.
fn run_until(h: &mut Harness, until: u64) {
    while let Some(next) = h.step() {
        if next > until || next <= h.clock.now() {
            break;
        }
        h.clock.set(next);
    }
    h.clock.set(until);
    h.step();
}

/// The frames of `got` that are not headers alone.
fn responses(got: Vec<(Frame, FrameMeta)>) -> Vec<(Frame, FrameMeta)> {
    got.into_iter().filter(|(f, _)| !f.flags().contains(FrameFlags::LIN_NO_RESPONSE)).collect()
}

#[test]
fn a_can_frame_reaches_the_lin_bus_as_the_response_of_its_identifiers_next_slot() {
    let mut h = Harness::new(MIXED);
    let (bcm, lin_rx) = (h.connect("bcm"), h.connect("lin-rx"));
    let port = h.open(&bcm, "body", "bcm", PortOptions::empty());
    h.open(&lin_rx, "doors", "lin-rx", PortOptions::empty());
    // The schedule starts now: 0x10 at 0, 0x20 at 10 ms, 0x10 at 20, 0x20 at 30.
    h.step();
    h.clock.set(START_NS + 12 * MS);
    let command = can(0x120, &[0xA1, 0xB2]);
    h.send(&bcm, port, command);
    run_until(&mut h, START_NS + 45 * MS);
    let got = responses(h.frames(&lin_rx));
    assert_eq!(got.len(), 1, "{got:?}");
    let (frame, meta) = got[0].clone();
    // Ends at 12 ms + its CAN frame time; the 0x20 slot at 30 ms carries it:
    // 64 bits at 19.2 kbit/s, with the Lamp frame's classic checksum.
    assert_eq!(frame, Frame::lin(0x20, Checksum::Classic, &[0xA1, 0xB2]).unwrap());
    assert_eq!(meta.timestamp_ns, START_NS + 30 * MS + 3_333_333);
    assert_eq!(meta.sender, u32::from(PortId::gateway(MAX_ROUTES as u16)), "sent by the gateway's own port");
    let gateways = h.control(ControlRequest::Gateways).unwrap();
    assert_eq!((gateways[0]["carried"].as_u64(), gateways[0]["direction"].as_str()), (Some(1), Some("can-to-lin")));
}

#[test]
fn a_lin_response_reaches_the_can_channel_at_its_end_plus_arbitration() {
    let mut h = Harness::new(MIXED);
    let (door, busy, can_rx) = (h.connect("door"), h.connect("busy"), h.connect("can-rx"));
    let door_port = h.open(&door, "doors", "door", PortOptions::empty());
    let busy_port = h.open(&busy, "body", "busy", PortOptions::empty());
    h.open(&can_rx, "body", "can-rx", PortOptions::empty());
    // Published before the schedule starts: the first slot (0x10 at 0) carries it.
    h.send(&door, door_port, Frame::lin(0x10, Checksum::Enhanced, &[0x0A, 0x0B]).unwrap());
    h.step();
    let response_end = START_NS + 3_333_333;
    // A CAN frame that holds the bus across the response's end: the mapped
    // frame arbitrates when it ends.
    let long = can(0x050, &[0x55; 8]);
    let long_start = response_end - 100_000;
    h.clock.set(long_start);
    h.send(&busy, busy_port, long.clone());
    run_until(&mut h, START_NS + 10 * MS);
    let got = h.frames(&can_rx);
    let mapped = can(0x310, &[0x0A, 0x0B]);
    let (long_end, mapped_ns) = (long_start + can_ns(&long), can_ns(&mapped));
    let expected = vec![(long, long_end), (mapped, long_end + mapped_ns)];
    assert_eq!(got.iter().map(|(f, m)| (f.clone(), m.timestamp_ns)).collect::<Vec<_>>(), expected);
    assert!(long_end > response_end, "the long frame was still on the bus at the response's end");

    // With the bus idle, the mapped frame starts at the response's end.
    h.send(&door, door_port, Frame::lin(0x10, Checksum::Enhanced, &[0x0C, 0x0D]).unwrap());
    run_until(&mut h, START_NS + 30 * MS);
    let got = h.frames(&can_rx);
    let second = can(0x310, &[0x0C, 0x0D]);
    assert_eq!(
        got.iter().map(|(f, m)| (f.clone(), m.timestamp_ns)).collect::<Vec<_>>(),
        [(second.clone(), START_NS + 20 * MS + 3_333_333 + can_ns(&second))]
    );
}

#[test]
fn frames_that_cannot_cross_are_refused_and_counted_by_reason_never_sent() {
    let mut h = Harness::new(MIXED);
    let (bcm, door, lin_rx, can_rx) = (h.connect("bcm"), h.connect("door"), h.connect("lin-rx"), h.connect("can-rx"));
    let bcm_port = h.open(&bcm, "body", "bcm", PortOptions::empty());
    let door_port = h.open(&door, "doors", "door", PortOptions::empty());
    h.open(&lin_rx, "doors", "lin-rx", PortOptions::empty());
    h.open(&can_rx, "body", "can-rx", PortOptions::empty());
    h.step();
    // Three bytes for the 2-byte Lamp frame; a remote frame with no data.
    h.send(&bcm, bcm_port, can(0x120, &[1, 2, 3]));
    h.send(&bcm, bcm_port, Frame::remote(0x120, false, 2).unwrap());
    // A door response read with a wrong checksum byte.
    h.send(&door, door_port, Frame::lin_with_checksum(0x10, Checksum::Enhanced, &[9, 9], 0).unwrap());
    run_until(&mut h, START_NS + 40 * MS);
    assert!(responses(h.frames(&lin_rx)).iter().all(|(f, _)| f.id() == 0x10), "no 0x20 response was published");
    let on_can: Vec<u32> = h.frames(&can_rx).iter().map(|(f, _)| f.id()).collect();
    assert_eq!(on_can, [0x120, 0x120], "only the CAN frames themselves, no 0x310");
    let gateways = h.control(ControlRequest::Gateways).unwrap();
    let (into_lin, into_can) = (&gateways[0], &gateways[1]);
    assert_eq!((into_lin["refused"]["length"].as_u64(), into_lin["carried"].as_u64()), (Some(2), Some(0)));
    assert_eq!(
        into_lin["last_refused"].as_str(),
        Some("CAN frame 0x120 is a remote frame: it has no data for LIN frame 0x20")
    );
    assert_eq!((into_can["refused"]["checksum_error"].as_u64(), into_can["carried"].as_u64()), (Some(1), Some(0)));
}

#[test]
fn a_response_too_long_for_its_slot_is_refused_with_the_lin_channels_reason() {
    // Without `frames` the CAN frame's length is the response's; 0x20's
    // slot of 4 ms holds 6 bytes (94 bits, 4.896 ms) no longer.
    let config = MIXED
        .replace("    frames = [{ name = \"Lamp\", id = 0x20, length = 2, checksum = \"classic\", publishers = [\"BCM\"] }]\n", "")
        .replace("node = \"BCM\"", "")
        .replace("{ id = 0x20, delay_ms = 10 }", "{ id = 0x20, delay_ms = 4 }");
    let mut h = Harness::new(&config);
    let (bcm, lin_rx) = (h.connect("bcm"), h.connect("lin-rx"));
    let port = h.open(&bcm, "body", "bcm", PortOptions::empty());
    h.open(&lin_rx, "doors", "lin-rx", PortOptions::empty());
    h.step();
    h.send(&bcm, port, can(0x120, &[1, 2, 3, 4, 5, 6]));
    h.send(&bcm, port, can(0x120, &[7]));
    run_until(&mut h, START_NS + 20 * MS);
    let got = responses(h.frames(&lin_rx));
    let carried: Vec<(Frame, u64)> = got.iter().map(|(f, m)| (f.clone(), m.timestamp_ns)).collect();
    // 0x20's slot at 10 ms: 1 byte + checksum, 54 bits.
    assert_eq!(carried, [(Frame::lin(0x20, Checksum::Enhanced, &[7]).unwrap(), START_NS + 10 * MS + 2_812_500)]);
    let gateways = h.control(ControlRequest::Gateways).unwrap();
    assert_eq!(gateways[0]["refused"]["schedule"].as_u64(), Some(1));
    let why = gateways[0]["last_refused"].as_str().unwrap();
    assert!(why.contains("longer than the shortest slot of identifier 0x20 (4000000 ns)"), "{why}");
}

/// MIXED without its `[[gateway]]` tables: the gateways come from the control API.
fn without_gateways() -> String {
    MIXED[..MIXED.find("[[gateway]]").unwrap()].to_owned()
}

fn lamp_gateway() -> GatewayConfig {
    GatewayConfig {
        from: "body".into(),
        to: "doors".into(),
        can_id: 0x120,
        extended: false,
        lin_id: 0x20,
        node: Some("BCM".into()),
    }
}

/// The LIN responses of identifier 0x20 `lin_rx` got since last asked.
fn lamp_responses(h: &Harness, lin_rx: &super::harness::TestClient) -> Vec<(Frame, u64)> {
    responses(h.frames(lin_rx)).into_iter().filter(|(f, _)| f.id() == 0x20).map(|(f, m)| (f, m.timestamp_ns)).collect()
}

#[test]
fn a_gateway_added_at_run_time_carries_frames_until_removed_and_its_counters_say_so() {
    let mut h = Harness::new(&without_gateways());
    let (bcm, lin_rx) = (h.connect("bcm"), h.connect("lin-rx"));
    let port = h.open(&bcm, "body", "bcm", PortOptions::empty());
    h.open(&lin_rx, "doors", "lin-rx", PortOptions::empty());
    // The schedule starts now: 0x10 at 0, 10 ms 0x20, 20 ms 0x10, 30 ms 0x20, …
    h.step();
    // Before the gateway: the CAN frame stays on CAN.
    h.send(&bcm, port, can(0x120, &[0x01, 0x02]));
    run_until(&mut h, START_NS + 15 * MS);
    assert_eq!(lamp_responses(&h, &lin_rx), []);

    let added = h.control(ControlRequest::AddGateway(lamp_gateway())).unwrap();
    assert_eq!(
        (added["gateway"].as_u64(), added["direction"].as_str(), added["carried"].as_u64()),
        (Some(0), Some("can-to-lin"), Some(0))
    );
    assert_eq!(added["length"].as_u64(), Some(2), "the Lamp frame's length, from the channel's frames");
    h.send(&bcm, port, can(0x120, &[0xA1, 0xB2]));
    run_until(&mut h, START_NS + 35 * MS);
    // The 0x20 slot at 30 ms carries it, with the Lamp frame's classic checksum.
    let lamp = Frame::lin(0x20, Checksum::Classic, &[0xA1, 0xB2]).unwrap();
    assert_eq!(lamp_responses(&h, &lin_rx), [(lamp, START_NS + 30 * MS + 3_333_333)]);

    // A frame queued for the slot at 50 ms when the gateway goes is not sent: counted as dropped.
    h.send(&bcm, port, can(0x120, &[0xC3, 0xD4]));
    run_until(&mut h, START_NS + 45 * MS);
    let removed = h.control(ControlRequest::RemoveGateway { id: 0 }).unwrap();
    assert_eq!(
        (removed["removed"].as_bool(), removed["carried"].as_u64(), removed["dropped"].as_u64()),
        (Some(true), Some(2), Some(1))
    );
    assert_eq!(h.control(ControlRequest::Gateways).unwrap(), serde_json::json!([]));
    h.send(&bcm, port, can(0x120, &[0xE5, 0xF6]));
    run_until(&mut h, START_NS + 95 * MS);
    assert_eq!(lamp_responses(&h, &lin_rx), [], "nothing crosses once the gateway is gone");
    assert_eq!(
        h.control(ControlRequest::RemoveGateway { id: 0 }),
        Err(ControlError::NotFound("no gateway 0; `fieldhub ctl gateways` lists them by `gateway`".into()))
    );
}

#[test]
fn gateways_keep_their_numbers_and_a_new_one_takes_the_next() {
    let mut h = Harness::new(MIXED);
    let added = h.control(ControlRequest::AddGateway(GatewayConfig { lin_id: 0x10, ..lamp_gateway() }));
    // 0x10 is the door's frame: the LIN channel names no publisher for it, so any node may answer.
    let added = added.unwrap();
    assert_eq!(added["gateway"].as_u64(), Some(2), "after the configuration's 0 and 1");
    h.control(ControlRequest::RemoveGateway { id: 0 }).unwrap();
    let listed = h.control(ControlRequest::Gateways).unwrap();
    let numbers: Vec<u64> = listed.as_array().unwrap().iter().map(|g| g["gateway"].as_u64().unwrap()).collect();
    assert_eq!(numbers, [1, 2]);
}

#[test]
fn a_bad_gateway_is_refused_naming_its_key_and_the_bus_keeps_none_of_it() {
    let mut h = Harness::new(&without_gateways());
    let mut refused = |config: GatewayConfig| h.control(ControlRequest::AddGateway(config)).unwrap_err();
    assert_eq!(
        refused(GatewayConfig { lin_id: 0x40, ..lamp_gateway() }),
        ControlError::Invalid("lin_id: 0x40 is not a LIN frame identifier (0..=0x3F)".into())
    );
    assert_eq!(
        refused(GatewayConfig { can_id: 0x800, ..lamp_gateway() }),
        ControlError::Invalid(
            "can_id: 0x800 exceeds the identifier range 0x7FF; set extended = true for a 29-bit identifier".into()
        )
    );
    let both_can = refused(GatewayConfig { to: "body".into(), ..lamp_gateway() });
    assert!(
        matches!(&both_can, ControlError::Invalid(why) if why.starts_with("to: 'body' and 'body' are both CAN channels")),
        "{both_can:?}"
    );
    let not_publisher = refused(GatewayConfig { node: Some("seat".into()), ..lamp_gateway() });
    assert!(
        matches!(&not_publisher, ControlError::Invalid(why) if why.starts_with("node: node 'seat' does not publish LIN frame 0x20")),
        "{not_publisher:?}"
    );
    let no_channel = refused(GatewayConfig { from: "chassis".into(), ..lamp_gateway() });
    assert!(
        matches!(&no_channel, ControlError::NotFound(why) if why.starts_with("from: no channel named 'chassis'")),
        "{no_channel:?}"
    );
    assert_eq!(h.control(ControlRequest::Gateways).unwrap(), serde_json::json!([]));
    // The refusals took no number: the first gateway added is 0.
    assert_eq!(h.control(ControlRequest::AddGateway(lamp_gateway())).unwrap()["gateway"].as_u64(), Some(0));
}
