//! Steps granted ahead (`bus/ahead.rs`): a participant that declares its
//! steps at once — frames stamped for later steps, `STEP_AHEAD` with wake
//! filters — leaves the bus exactly as one that steps every period: the
//! same frames at the same bus times, byte for byte, and its grants where
//! it had input. Bad input is refused by name, and what the hub holds of
//! a participant stays bounded.

use fieldhub_proto::fate::DropReason;
use fieldhub_proto::wire::{ErrorCode, PortOptions, WakeFilter};
use fieldhub_proto::{Frame, FrameMeta};

use super::super::harness::Harness;
use super::{can, port_stats, IDEAL, MS, TIMED};
use crate::credit::PARTICIPANT_CREDITS;
use crate::fault::FaultSpec;
use crate::outbox::Outbound;
use crate::request::ControlRequest;

/// Bus time the runs end at.
const END: u64 = 120 * MS;
/// The request the responder answers, and its answer.
const REQUEST: u32 = 0x7E0;
const ANSWER: u32 = 0x7E8;

/// What one run gives: everything the observer received, the sender's
/// grants, and the bus times at which the responder answered a request.
#[derive(Debug, PartialEq)]
struct Run {
    observed: Vec<(Frame, FrameMeta)>,
    sender_grants: Vec<u64>,
    answered_at: Vec<u64>,
}

/// Four clients on `config`'s channel through a seeded fault
/// rule: a sender stepping 3 ms sends 0 to 3 frames of seeded identifiers
/// per step, some of them `REQUEST`; a rest-bus node sends frame n (0x200,
/// data n) at n ms; a responder answers each `REQUEST` it received with
/// `ANSWER` at its next step; an observer receives. `ahead`: the rest-bus
/// node sends all its frames stamped at once and steps to the end in one
/// `STEP_AHEAD`, and the responder steps ahead woken by `REQUEST` only;
/// otherwise both step every 1 ms.
fn run(config: &str, ahead: bool) -> Run {
    let mut h = Harness::in_virtual_time(config);
    let sender = h.connect_synchronized("sender");
    let (rbs, responder) = match ahead {
        true => (h.connect_ahead("rbs"), h.connect_ahead("responder")),
        false => (h.connect_synchronized("rbs"), h.connect_synchronized("responder")),
    };
    let rx = h.connect("rx");
    let sender_port = h.open(&sender, "can0", "sender", PortOptions::empty());
    let rbs_port = h.open(&rbs, "can0", "rbs", PortOptions::TRANSMIT_ONLY);
    let responder_port = h.open(&responder, "can0", "responder", PortOptions::empty());
    h.open(&rx, "can0", "rx", PortOptions::empty());
    let spec: FaultSpec = serde_json::from_value(serde_json::json!({
        "channel": "can0", "at": "bus", "action": {"type": "drop"}, "probability": 0.1, "seed": 5
    }))
    .unwrap();
    h.control(ControlRequest::AddFault(spec)).unwrap();
    let mut seed = 0x9e37_79b9_u32;
    let mut dice = move || {
        seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        seed >> 16
    };
    let wake = [WakeFilter { can_id: REQUEST, mask: 0x7FF }];
    let mut run = Run { observed: Vec::new(), sender_grants: Vec::new(), answered_at: Vec::new() };
    let (mut sender_granted, mut rbs_granted, mut responder_granted) = (true, true, true);
    let mut requests_seen = 0;
    while h.bus.clock.now() < END {
        let now = h.bus.clock.now();
        if sender_granted {
            for n in 0..dice() % 4 {
                let id = if dice() % 3 == 0 { REQUEST } else { 0x100 + dice() % 0x100 };
                h.send(&sender, sender_port, can(id, &[(now / MS) as u8, n as u8]));
            }
            h.announce(&sender, (now + 3 * MS).min(END));
        }
        if rbs_granted {
            match ahead {
                true => {
                    for n in now / MS..END / MS {
                        h.send_at(&rbs, rbs_port, can(0x200, &[n as u8]), n * MS);
                    }
                    h.announce_ahead(&rbs, END, MS, &[]);
                }
                false => {
                    h.send(&rbs, rbs_port, can(0x200, &[(now / MS) as u8]));
                    h.announce(&rbs, now + MS);
                }
            }
        }
        if responder_granted {
            for _ in 0..std::mem::take(&mut requests_seen) {
                h.send(&responder, responder_port, can(ANSWER, &[(now / MS) as u8]));
                run.answered_at.push(now);
            }
            match ahead {
                true => h.announce_ahead(&responder, END, MS, &wake),
                false => h.announce(&responder, now + MS),
            }
        }
        assert!(h.advance_virtual_time(), "bus time moves at {now} ns");
        let granted = |items: &[Outbound]| items.iter().any(|i| matches!(i, Outbound::Grant { .. }));
        sender_granted = granted(&h.items(&sender));
        if sender_granted {
            run.sender_grants.push(h.bus.clock.now());
        }
        rbs_granted = granted(&h.items(&rbs));
        let items = h.items(&responder);
        responder_granted = granted(&items);
        requests_seen +=
            items.iter().filter(|i| matches!(i, Outbound::Frame { frame, .. } if frame.id() == REQUEST)).count();
        run.observed.extend(h.frames(&rx));
    }
    run
}

/// On a timed channel a request is delivered at its end of frame, inside a
/// step; on an ideal one at the bus time it was queued — a step boundary,
/// where it belongs to the step after.
#[test]
fn stepping_ahead_leaves_the_bus_byte_for_byte_as_stepping_every_period_and_wakes_the_responder_where_it_had_input() {
    for config in [TIMED, IDEAL] {
        same_as_every_period(config);
    }
}

fn same_as_every_period(config: &str) {
    let every_period = run(config, false);
    let ahead = run(config, true);
    let numbered: Vec<u8> = ahead.observed.iter().filter(|(f, _)| f.id() == 0x200).map(|(f, _)| f.data()[0]).collect();
    assert!(numbered.len() > 100, "the 0x200 frames, less those the seeded rule dropped: {}", numbered.len());
    assert!(numbered.windows(2).all(|w| w[0] < w[1]), "numbered frames go out in order: {numbered:?}");
    assert!(ahead.answered_at.len() >= 10, "the responder answered: {:?}", ahead.answered_at);
    assert_eq!(ahead.answered_at, every_period.answered_at, "answers at the same grants");
    assert_eq!(ahead.sender_grants, every_period.sender_grants);
    assert_eq!(ahead.observed, every_period.observed, "the same frames, stamps and sequence numbers");
    assert_eq!(run(config, true), ahead, "and the same on every run");
}

#[test]
fn a_participant_stepping_ahead_with_nothing_to_react_to_is_granted_once_at_its_end() {
    let mut h = Harness::in_virtual_time(TIMED);
    let (rbs, rx) = (h.connect_ahead("rbs"), h.connect("rx"));
    let port = h.open(&rbs, "can0", "rbs", PortOptions::TRANSMIT_ONLY);
    h.open(&rx, "can0", "rx", PortOptions::empty());
    h.items(&rbs);
    for n in 0..100u64 {
        h.send_at(&rbs, port, can(0x100, &[n as u8]), n * MS);
    }
    h.announce_ahead(&rbs, 100 * MS, MS, &[]);
    assert!(h.advance_virtual_time());
    let grants: Vec<u64> = h
        .items(&rbs)
        .iter()
        .filter_map(|i| if let Outbound::Grant { now_ns } = i { Some(*now_ns) } else { None })
        .collect();
    assert_eq!(grants, vec![100 * MS], "one round trip for 100 steps");
    let frames = h.frames(&rx);
    assert_eq!(frames.len(), 100);
    for (n, (frame, meta)) in frames.iter().enumerate() {
        let bits = fieldhub_proto::bits::FrameBits::of(frame).duration_ns(500_000, 500_000);
        assert_eq!(
            (frame.data()[0], meta.timestamp_ns),
            (n as u8, n as u64 * MS + bits),
            "frame {n} ends at its bit time"
        );
    }
}

#[test]
fn frames_held_ahead_count_towards_what_the_hub_holds_and_past_it_are_refused_as_queue_full() {
    let mut h = Harness::in_virtual_time(TIMED);
    let rbs = h.connect_ahead("rbs");
    let port = h.open(&rbs, "can0", "rbs", PortOptions::TRANSMIT_ONLY);
    let over = 10;
    for n in 0..u64::from(PARTICIPANT_CREDITS) + over {
        h.send_at(&rbs, port, can(0x100, &[n as u8]), MS + n * 1000);
    }
    assert_eq!(port_stats(&mut h, "rbs").tx_dropped_by_reason.get("queue_full"), Some(&over));
    h.announce_ahead(&rbs, 100 * MS, MS, &[]);
    assert!(h.advance_virtual_time());
    let dropped: u32 = h
        .items(&rbs)
        .iter()
        .filter_map(|i| match i {
            Outbound::TxDropped { reason: DropReason::QueueFull, dropped, .. } => Some(*dropped),
            _ => None,
        })
        .sum();
    assert_eq!(u64::from(dropped), over, "reported to the participant");
}

#[test]
fn bad_steps_ahead_are_refused_by_name_and_the_step_stays_as_it_was() {
    let mut h = Harness::in_virtual_time(TIMED);
    let (plain, ahead) = (h.connect_synchronized("plain"), h.connect_ahead("ahead"));
    let port = h.open(&ahead, "can0", "ahead", PortOptions::empty());
    h.items(&plain);
    h.items(&ahead);
    let errors = |h: &Harness, client| -> Vec<(ErrorCode, String)> {
        h.items(client)
            .into_iter()
            .filter_map(|i| match i {
                Outbound::Error { code, text, fatal: false, .. } => Some((code, text)),
                _ => None,
            })
            .collect()
    };
    h.announce_ahead(&plain, 10 * MS, MS, &[]);
    let refused = errors(&h, &plain);
    assert_eq!(refused.len(), 1);
    assert!(refused[0].0 == ErrorCode::TimeMode && refused[0].1.contains("without the AHEAD option"), "{refused:?}");
    h.announce_ahead(&ahead, 10 * MS, 0, &[]);
    assert!(errors(&h, &ahead)[0].1.contains("period 0"));
    h.announce_ahead(&ahead, 0, MS, &[]);
    assert!(errors(&h, &ahead)[0].1.contains("does not move forward"));
    // Stamped past the end of the step it was sent in: refused when the step is announced.
    h.send_at(&ahead, port, can(0x123, &[1]), 5 * MS);
    h.send_at(&ahead, port, can(0x124, &[2]), 50 * MS);
    h.announce_ahead(&ahead, 10 * MS, MS, &[]);
    let refused = errors(&h, &ahead);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].0, ErrorCode::InvalidFrame);
    assert!(
        refused[0].1.contains("1 frame(s) stamped later than") && refused[0].1.contains("50000000 ns"),
        "{refused:?}"
    );
    assert_eq!(port_stats(&mut h, "ahead").tx_refused, 1);
    h.announce(&plain, 10 * MS);
    assert!(h.advance_virtual_time());
    assert_eq!(h.bus.clock.now(), 10 * MS, "its own frame does not wake it");
}
