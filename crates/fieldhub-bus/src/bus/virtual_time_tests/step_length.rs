//! How often a participant steps changes nothing on the bus: one that sends
//! nothing, stepping every 1 ms or once to the end, receives the same frames
//! at the same bus times and leaves every other client's frames and grants
//! the same. Serving the channels at a bus time where no deadline and no
//! frame falls does nothing — what steps granted ahead would rest on
//! (docs/virtual-time.md, "Next: steps granted ahead").

use fieldhub_proto::wire::PortOptions;
use fieldhub_proto::{Frame, FrameMeta};

use super::super::harness::Harness;
use super::{can, MS, TIMED};
use crate::fault::FaultSpec;
use crate::outbox::Outbound;
use crate::request::ControlRequest;

/// Bus time both runs end at.
const END: u64 = 300 * MS;

/// What one run gives: the observer's frames, the sender's grants, and the
/// idle participant's frames, each with the grant it first saw it at.
struct Run {
    observed: Vec<(Frame, FrameMeta)>,
    sender_grants: Vec<u64>,
    idle_saw: Vec<(Frame, FrameMeta, u64)>,
}

/// A sender stepping 3 ms sends a seeded number of frames (0 to 3) with
/// seeded identifiers each step — up to about 80 % load on the 500 kbit/s
/// timed channel, through a seeded fault rule — while an idle participant
/// steps `idle_step` at a time and an observer receives.
fn run(idle_step: u64) -> Run {
    let mut h = Harness::in_virtual_time(TIMED);
    let (sender, idle, rx) = (h.connect_synchronized("sender"), h.connect_synchronized("idle"), h.connect("rx"));
    let port = h.open(&sender, "can0", "sender", PortOptions::empty());
    h.open(&idle, "can0", "idle", PortOptions::empty());
    h.open(&rx, "can0", "rx", PortOptions::empty());
    let spec: FaultSpec = serde_json::from_value(serde_json::json!({
        "channel": "can0", "at": "bus", "action": {"type": "drop"}, "probability": 0.2, "seed": 11
    }))
    .unwrap();
    h.control(ControlRequest::AddFault(spec)).unwrap();
    let (mut sender_granted, mut idle_granted) = (true, true);
    let mut seed = 0x2545_f491_u32;
    let mut dice = move || {
        seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        seed >> 16
    };
    let mut run = Run { observed: Vec::new(), sender_grants: Vec::new(), idle_saw: Vec::new() };
    let mut waiting = Vec::new();
    while h.bus.clock.now() < END {
        let now = h.bus.clock.now();
        if sender_granted {
            for n in 0..dice() % 4 {
                h.send(&sender, port, can(0x100 + dice() % 0x100, &[(now / MS) as u8, n as u8]));
            }
            h.announce(&sender, now + 3 * MS);
        }
        if idle_granted {
            h.announce(&idle, (now + idle_step).min(END));
        }
        assert!(h.advance_virtual_time(), "bus time moves at {now} ns");
        let granted = |items: &[Outbound]| items.iter().any(|i| matches!(i, Outbound::Grant { .. }));
        let sender_items = h.items(&sender);
        sender_granted = granted(&sender_items);
        if sender_granted {
            run.sender_grants.push(h.bus.clock.now());
        }
        // Its frames wait in its queue until it reads them at its grant.
        let idle_items = h.items(&idle);
        idle_granted = granted(&idle_items);
        waiting.extend(idle_items.into_iter().filter_map(|item| match item {
            Outbound::Frame { frame, meta, .. } => Some((frame, meta)),
            _ => None,
        }));
        if idle_granted {
            let now = h.bus.clock.now();
            run.idle_saw.extend(waiting.drain(..).map(|(frame, meta)| (frame, meta, now)));
        }
        run.observed.extend(h.frames(&rx));
    }
    run
}

#[test]
fn an_idle_participant_stepping_every_1_ms_or_once_to_the_end_leaves_the_bus_the_same() {
    let every_ms = run(MS);
    let at_once = run(END);
    assert!(every_ms.observed.len() > 100, "frames went: {}", every_ms.observed.len());
    assert_eq!(every_ms.observed, at_once.observed, "the same frames at the same bus times in the same order");
    assert_eq!(every_ms.sender_grants, at_once.sender_grants);
    let received = |r: &Run| r.idle_saw.iter().map(|(f, m, _)| (f.clone(), *m)).collect::<Vec<_>>();
    assert_eq!(received(&every_ms), received(&at_once), "the idle participant received the same");
    assert_eq!(received(&every_ms), every_ms.observed);
    // Stepping every 1 ms, it saw each frame at the first boundary at or
    // after its end of frame: a wake-up on receive would grant it there.
    for (frame, meta, granted) in &every_ms.idle_saw {
        assert!(meta.timestamp_ns <= *granted && *granted < meta.timestamp_ns + MS, "{frame:?} {meta:?} at {granted}");
    }
    assert!(at_once.idle_saw.iter().all(|&(.., granted)| granted == END));
}
