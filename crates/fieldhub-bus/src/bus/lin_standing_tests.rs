//! LIN standing responses as clients send them, on the manual clock: a
//! standing record returns its transmit credit at once (it never waits in
//! a queue), the latest value answers every header, a withdrawal leaves the
//! next header unanswered, and a refusal is told to its sender only.

use fieldhub_proto::lin::Checksum;
use fieldhub_proto::wire::PortOptions;
use fieldhub_proto::{Frame, FrameFlags};

use super::harness::{Harness, START_NS};
use crate::clock::Clock;
use crate::outbox::Outbound;

const MS: u64 = 1_000_000;

const LIN: &str = r#"
    [[channel]]
    name = "body"
    protocol = "lin"
    bitrate = 19200
    timing = "timed"

    [channel.lin]
    schedule = [{ id = 0x10, delay_ms = 10 }]
"#;

fn standing(data: &[u8]) -> Frame {
    Frame::lin_standing(0x10, Checksum::Enhanced, data).unwrap()
}

/// Serve every deadline up to bus time `until`.
pub(super) fn run_until(h: &mut Harness, until: u64) {
    while let Some(next) = h.step() {
        if next > until || next <= h.clock.now() {
            break;
        }
        h.clock.set(next);
    }
    h.clock.set(until);
    h.step();
}

#[test]
fn standing_records_return_their_credit_at_once_and_the_latest_answers_every_header() {
    let mut h = Harness::new(LIN);
    let reader = h.connect("reader");
    h.open(&reader, "body", "reader", PortOptions::empty());
    let slave = h.connect("slave");
    let port = h.open(&slave, "body", "slave", PortOptions::empty());
    // More than the 256 frames of credit a client has in the bus: each
    // standing record gives its credit back as the bus reads it.
    for n in 0..300u32 {
        assert!(h.send_with_credit(&slave, port, standing(&n.to_le_bytes()[..2])), "record {n} had no credit");
    }
    run_until(&mut h, START_NS + 25 * MS);
    h.send(&slave, port, Frame::lin_withdraw(0x10).unwrap());
    run_until(&mut h, START_NS + 45 * MS);
    let got: Vec<(Vec<u8>, FrameFlags, u64)> =
        h.frames(&reader).into_iter().map(|(f, m)| (f.data().to_vec(), f.flags(), m.timestamp_ns - START_NS)).collect();
    // The schedule started as the reader's port opened; the slave's
    // records all came before its first header: the last one answers.
    let latest = 299u32.to_le_bytes()[..2].to_vec();
    let none = FrameFlags::LIN_NO_RESPONSE;
    assert_eq!(
        got,
        [
            (latest.clone(), FrameFlags::empty(), 3_333_333),
            (latest.clone(), FrameFlags::empty(), 10 * MS + 3_333_333),
            (latest, FrameFlags::empty(), 20 * MS + 3_333_333),
            (vec![], none, 30 * MS + 1_770_833),
            (vec![], none, 40 * MS + 1_770_833),
        ]
    );
    // Nothing was refused; no error reached the slave.
    assert!(h.items(&slave).iter().all(|item| !matches!(item, Outbound::Error { .. })));
}

#[test]
fn a_second_port_standing_for_an_identifier_is_refused_and_told_why() {
    let mut h = Harness::new(LIN);
    let slave = h.connect("slave");
    let port = h.open(&slave, "body", "door", PortOptions::empty());
    let other = h.connect("other");
    let other_port = h.open(&other, "body", "seat", PortOptions::empty());
    h.send(&slave, port, standing(&[1, 2]));
    h.send(&other, other_port, standing(&[3, 4]));
    h.send(&other, other_port, Frame::lin_withdraw(0x10).unwrap());
    h.step();
    let errors: Vec<String> = h
        .items(&other)
        .into_iter()
        .filter_map(|item| match item {
            Outbound::Error { text, fatal: false, .. } => Some(text),
            _ => None,
        })
        .collect();
    assert_eq!(errors.len(), 2, "{errors:#?}");
    assert!(errors[0].starts_with("port 'seat' publishes a standing response for 0x10, for which another port"));
    assert!(errors[1].starts_with("port 'seat' withdraws a standing response for 0x10, which it does not have"));
    assert!(h.items(&slave).iter().all(|item| !matches!(item, Outbound::Error { .. })));
    let stats = h.bus.stats();
    let seat = stats.ports.iter().find(|p| p.name == "seat").unwrap();
    assert_eq!(seat.tx_refused, 2);
}
