//! Virtual time on the in-process bus: how bus time advances, what a step's
//! frames become, and that nothing depends on the order the bus reads them.

use std::time::Duration;

use fieldhub_proto::bits::FrameBits;
use fieldhub_proto::wire::{ErrorCode, PortOptions};
use fieldhub_proto::{Frame, FrameMeta};

use super::harness::{Harness, TestClient};
use crate::fault::FaultSpec;
use crate::outbox::Outbound;
use crate::request::ControlRequest;

const TIMED: &str = r#"
    [hub]
    time = "virtual"
    [[channel]]
    name = "can0"
    timing = "timed"
    bitrate = 500000
"#;

const MS: u64 = 1_000_000;

fn can(id: u32, data: &[u8]) -> Frame {
    Frame::can(id, false, data).unwrap()
}

/// The bus times of the `GRANT`s `client` got so far.
fn grants(h: &Harness, client: &TestClient) -> Vec<u64> {
    h.items(client)
        .into_iter()
        .filter_map(|item| match item {
            Outbound::Grant { now_ns } => Some(now_ns),
            _ => None,
        })
        .collect()
}

#[test]
fn bus_time_waits_for_every_participant_and_advances_to_the_smallest_boundary() {
    let mut h = Harness::in_virtual_time(TIMED);
    let (fast, slow) = (h.connect_synchronized("fast"), h.connect_synchronized("slow"));
    assert_eq!((grants(&h, &fast), grants(&h, &slow)), (vec![0], vec![0]), "each joins at bus time 0");

    h.announce(&fast, MS);
    assert!(!h.advance_virtual_time(), "slow is still computing its step");
    h.announce(&slow, 3 * MS);
    assert!(h.advance_virtual_time());
    assert_eq!(h.bus.clock.now(), MS);
    assert_eq!((grants(&h, &fast), grants(&h, &slow)), (vec![MS], vec![]), "slow stays done up to 3 ms");

    h.announce(&fast, 2 * MS);
    assert!(h.advance_virtual_time());
    h.announce(&fast, 3 * MS);
    assert!(h.advance_virtual_time());
    assert!(!h.advance_virtual_time(), "both compute again");
    assert_eq!((grants(&h, &fast), grants(&h, &slow)), (vec![2 * MS, 3 * MS], vec![3 * MS]));
}

#[test]
fn a_step_that_does_not_move_forward_is_refused_and_observers_are_never_waited_for() {
    let mut h = Harness::in_virtual_time(TIMED);
    let (ecu, observer) = (h.connect_synchronized("ecu"), h.connect("observer"));
    h.items(&ecu);
    h.announce(&ecu, 0);
    h.announce(&observer, MS);
    let refused = |items: Vec<Outbound>| {
        items.iter().any(|item| matches!(item, Outbound::Error { code: ErrorCode::TimeMode, fatal: false, .. }))
    };
    assert!(refused(h.items(&ecu)), "a step to the time it stands at");
    assert!(refused(h.items(&observer)), "a step from a session that is not synchronised");
    h.announce(&ecu, MS);
    h.announce(&ecu, 2 * MS);
    assert!(refused(h.items(&ecu)), "a second step before the first one's grant");
    assert!(h.advance_virtual_time(), "the observer holds nothing back");
    assert_eq!(grants(&h, &ecu), [MS], "the first announced boundary stands");
}

/// Two senders contend with the same identifier in every step, plus a
/// seeded fault rule; `reverse` flips the order the bus reads their frames
/// in. Returns everything the receiver got.
fn contended_run(reverse: bool) -> Vec<(Frame, FrameMeta)> {
    let mut h = Harness::in_virtual_time(TIMED);
    let (a, b, rx) = (h.connect_synchronized("a"), h.connect_synchronized("b"), h.connect("rx"));
    let pa = h.open(&a, "can0", "ecu_a", PortOptions::empty());
    let pb = h.open(&b, "can0", "ecu_b", PortOptions::empty());
    h.open(&rx, "can0", "rx", PortOptions::empty());
    let spec: FaultSpec = serde_json::from_value(serde_json::json!({
        "channel": "can0", "at": "bus", "action": {"type": "drop"}, "probability": 0.3, "seed": 7
    }))
    .unwrap();
    h.control(ControlRequest::AddFault(spec)).unwrap();
    for step in 0..50u8 {
        let sends: [(&TestClient, u16, u8); 2] = [(&a, pa, 0xA), (&b, pb, 0xB)];
        let order: Vec<_> = if reverse { sends.iter().rev().collect() } else { sends.iter().collect() };
        for &&(client, port, tag) in &order {
            h.send(client, port, can(0x100, &[tag, step]));
        }
        let until = u64::from(step + 1) * MS;
        h.announce(&b, until);
        h.announce(&a, until);
        assert!(h.advance_virtual_time());
    }
    h.frames(&rx)
}

#[test]
fn ties_and_fault_dice_follow_port_names_not_the_order_the_bus_read_the_frames() {
    let first = contended_run(false);
    let second = contended_run(true);
    assert_eq!(first, second, "the same run, whatever the arrival order within a step");
    assert!(first.len() > 40 && first.len() < 90, "the rule dropped some of 100 frames: {}", first.len());
    // Equal arbitration fields: the port that sorts first (ecu_a) goes first.
    assert_eq!(first[0].0.data()[0], 0xA);
}

#[test]
fn a_window_s_frames_end_at_their_exact_bit_time_and_carry_bus_time() {
    let mut h = Harness::in_virtual_time(TIMED);
    let (ecu, rx) = (h.connect_synchronized("ecu"), h.connect("rx"));
    let port = h.open(&ecu, "can0", "ecu", PortOptions::empty());
    h.open(&rx, "can0", "rx", PortOptions::empty());
    let (first, second) = (can(0x10, &[1; 8]), can(0x20, &[2; 2]));
    h.send(&ecu, port, first);
    h.send(&ecu, port, second);
    h.announce(&ecu, MS);
    assert!(h.advance_virtual_time());
    let first_ns = FrameBits::of(&first).duration_ns(500_000, 500_000);
    let second_ns = FrameBits::of(&second).duration_ns(500_000, 500_000);
    let stamps: Vec<u64> = h.frames(&rx).iter().map(|(_, meta)| meta.timestamp_ns).collect();
    assert_eq!(stamps, [first_ns, first_ns + second_ns], "sent at bus time 0, back to back");
}

#[test]
fn a_port_closed_before_its_step_ends_takes_its_frames_along_and_its_client_stays() {
    let mut h = Harness::in_virtual_time(TIMED);
    let (ecu, rx) = (h.connect_synchronized("ecu"), h.connect("rx"));
    let (gone, kept) =
        (h.open(&ecu, "can0", "gone", PortOptions::empty()), h.open(&ecu, "can0", "kept", PortOptions::empty()));
    h.open(&rx, "can0", "rx", PortOptions::empty());
    h.send(&ecu, gone, can(0x1, &[1]));
    h.send(&ecu, kept, can(0x2, &[2]));
    h.bus.handle(crate::inbox::Inbound::ClosePort { client: ecu.id, port: gone });
    h.announce(&ecu, MS);
    assert!(h.advance_virtual_time());
    let ids: Vec<u32> = h.frames(&rx).iter().map(|(f, _)| f.id()).collect();
    assert_eq!(ids, [0x2], "the closed port's frame left with it");
    let items = h.items(&ecu);
    assert!(!items.iter().any(|i| matches!(i, Outbound::Error { .. })), "no error for the client: {items:?}");
    assert!(items.iter().any(|i| matches!(i, Outbound::Grant { now_ns: MS })));
}

#[test]
fn a_stalled_participant_is_reported_and_with_drop_no_longer_holds_time_back() {
    let config = format!(
        "{}\n",
        TIMED.replace("time = \"virtual\"", "time = \"virtual\"\nstep_timeout_ms = 1\non_stall = \"drop\"")
    );
    let mut h = Harness::in_virtual_time(&config);
    let (ecu, stuck) = (h.connect_synchronized("ecu"), h.connect_synchronized("stuck"));
    h.items(&stuck);
    h.announce(&ecu, MS);
    assert!(!h.advance_virtual_time());
    h.wall.advance(Duration::from_millis(2));
    h.bus.report_stalls();
    let reported = h.items(&stuck);
    assert!(
        reported.iter().any(|item| matches!(item, Outbound::Error { code: ErrorCode::StepTimeout, fatal: false, .. })),
        "{reported:?}"
    );
    assert!(h.advance_virtual_time(), "time goes on without the stalled participant");
    assert_eq!(grants(&h, &ecu), [0, MS]);
    assert!(h.items(&stuck).is_empty(), "a dropped participant gets no more grants");
}
